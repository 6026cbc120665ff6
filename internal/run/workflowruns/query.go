package workflowruns

import (
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/platform/apperr"
	"appkb/models"
)

// Run returns one run of appID; another app's run is not_found.
func (s *Store) Run(ctx context.Context, appID, runID string) (*models.WorkflowRun, error) {
	var run models.WorkflowRun
	err := s.db.WithContext(ctx).Where("id = ? AND app_id = ?", runID, appID).Take(&run).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, apperr.NotFound("Workflow run not found.")
	}
	if err != nil {
		return nil, err
	}
	return &run, nil
}

// NodeExecutions returns the finished nodes of a run in execution order.
func (s *Store) NodeExecutions(ctx context.Context, runID string) ([]models.WorkflowNodeExecution, error) {
	var out []models.WorkflowNodeExecution
	err := s.db.WithContext(ctx).Where("workflow_run_id = ?", runID).Order("node_index, created_at").Find(&out).Error
	return out, err
}

// LogFilter selects run logs. Zero values select everything.
type LogFilter struct {
	// Keyword matches runs whose inputs, outputs or error contain it, or
	// whose end user's session id does.
	Keyword string
	Status  string
	// Before and After bound created_at (both exclusive).
	Before, After *time.Time
	// SessionID is the `user` string of the end user who started the run.
	SessionID string
	// Page counts from 1; Limit is the page size.
	Page, Limit int
}

// LogEntry is one run with its version label and end user.
type LogEntry struct {
	Run     models.WorkflowRun
	Version string
	EndUser *models.EndUser
}

// Logs returns one page of appID's runs, newest first, and how many runs
// match overall.
func (s *Store) Logs(ctx context.Context, appID string, f LogFilter) ([]LogEntry, int, error) {
	if f.Page < 1 {
		f.Page = 1
	}
	if f.Limit < 1 {
		f.Limit = 20
	}
	q := s.db.WithContext(ctx).Model(&models.WorkflowRun{}).Where("app_id = ?", appID)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Before != nil {
		q = q.Where("created_at < ?", f.Before.UTC())
	}
	if f.After != nil {
		q = q.Where("created_at > ?", f.After.UTC())
	}
	if f.SessionID != "" {
		q = q.Where("end_user_id IN (SELECT id FROM end_users WHERE app_id = ? AND session_id = ?)", appID, f.SessionID)
	}
	if kw := strings.TrimSpace(f.Keyword); kw != "" {
		like := "%" + db.EscapeLike(kw) + "%"
		q = q.Where(`(`+db.ContainsCI(s.db, "inputs")+` OR `+db.ContainsCI(s.db, "outputs")+` OR `+db.ContainsCI(s.db, "error")+`
			OR end_user_id IN (SELECT id FROM end_users WHERE app_id = ? AND `+db.ContainsCI(s.db, "session_id")+`))`,
			like, like, like, appID, like)
	}
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, 0, err
	}
	var runs []models.WorkflowRun
	err := q.Order("created_at DESC, id DESC").Offset((f.Page - 1) * f.Limit).Limit(f.Limit).Find(&runs).Error
	if err != nil {
		return nil, 0, err
	}
	versions := map[string]string{}
	users := map[string]*models.EndUser{}
	out := make([]LogEntry, 0, len(runs))
	for _, r := range runs {
		e := LogEntry{Run: r}
		label, ok := versions[r.WorkflowID]
		if !ok {
			var v models.WorkflowVersion
			if err := s.db.WithContext(ctx).Select("version").Where("id = ?", r.WorkflowID).Take(&v).Error; err == nil {
				label = v.Version
			}
			versions[r.WorkflowID] = label
		}
		e.Version = label
		if r.EndUserID != nil {
			u, ok := users[*r.EndUserID]
			if !ok {
				var eu models.EndUser
				if err := s.db.WithContext(ctx).Where("id = ?", *r.EndUserID).Take(&eu).Error; err == nil {
					u = &eu
				}
				users[*r.EndUserID] = u
			}
			e.EndUser = u
		}
		out = append(out, e)
	}
	return out, int(total), nil
}
