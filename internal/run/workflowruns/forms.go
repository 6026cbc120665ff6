package workflowruns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"appkb/internal/platform/apperr"
	"appkb/internal/run/workflow"
	"appkb/models"
)

// Forms keeps the human input forms of paused runs. It implements
// workflow.FormStore.
type Forms struct{ s *Store }

// Forms returns the form store over the same database.
func (s *Store) Forms() *Forms { return &Forms{s: s} }

var _ workflow.FormStore = (*Forms)(nil)

// CreateForm stores a new waiting form of run runID. The app is the run's.
func (f *Forms) CreateForm(ctx context.Context, runID string, form *workflow.HumanForm) error {
	var run models.WorkflowRun
	if err := f.s.db.WithContext(ctx).Select("app_id").Where("id = ?", runID).Take(&run).Error; err != nil {
		return fmt.Errorf("find the run of a form: %w", err)
	}
	def, err := json.Marshal(form)
	if err != nil {
		return fmt.Errorf("encode form: %w", err)
	}
	row := &models.HumanInputForm{
		ID: form.ID, Token: form.Token, AppID: run.AppID, WorkflowRunID: runID, NodeID: form.NodeID,
		Definition: string(def), Status: workflow.FormWaiting,
		ExpiresAt: time.Unix(form.ExpiresAt, 0).UTC(), CreatedAt: time.Unix(form.CreatedAt, 0).UTC(),
	}
	f.s.writeMu.Lock()
	defer f.s.writeMu.Unlock()
	if err := f.s.db.WithContext(ctx).Create(row).Error; err != nil {
		return fmt.Errorf("store form: %w", err)
	}
	return nil
}

// Form is a stored form with its answer and its run.
type Form struct {
	*workflow.HumanForm
	AppID string
	RunID string
}

func decodeForm(row *models.HumanInputForm) (*Form, error) {
	var hf workflow.HumanForm
	if err := json.Unmarshal([]byte(row.Definition), &hf); err != nil {
		return nil, fmt.Errorf("decode form %s: %w", row.ID, err)
	}
	hf.Status = row.Status
	if row.ActionID != nil {
		hf.ActionID = *row.ActionID
	}
	if row.SubmittedData != nil {
		if err := json.Unmarshal([]byte(*row.SubmittedData), &hf.Data); err != nil {
			return nil, fmt.Errorf("decode answer of form %s: %w", row.ID, err)
		}
	}
	return &Form{HumanForm: &hf, AppID: row.AppID, RunID: row.WorkflowRunID}, nil
}

func formNotFound() error { return apperr.NotFound("Form not found.") }

// closed is the error for a form that takes no more answers, or nil.
func closed(row *models.HumanInputForm, now time.Time) error {
	switch {
	case row.Status == workflow.FormSubmitted:
		return apperr.Fail(apperr.CodeFormSubmitted, "This form has already been answered.")
	case row.Status == workflow.FormTimeout || !now.Before(row.ExpiresAt):
		return apperr.Fail(apperr.CodeFormExpired, "This form has expired.")
	}
	return nil
}

// Open returns the waiting form with the given token, in the given app.
// A form of another app is not found; one that was answered or expired
// is refused with 412.
func (f *Forms) Open(ctx context.Context, appID, token string) (*Form, error) {
	var row models.HumanInputForm
	err := f.s.db.WithContext(ctx).Where("token = ? AND app_id = ?", token, appID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, formNotFound()
	}
	if err != nil {
		return nil, err
	}
	if err := closed(&row, time.Now()); err != nil {
		return nil, err
	}
	return decodeForm(&row)
}

// Submit answers a waiting form once: the first answer wins. It checks
// the action and the values against the form and returns the answered
// form.
func (f *Forms) Submit(ctx context.Context, appID, token, user, action string, data map[string]any) (*Form, error) {
	form, err := f.Open(ctx, appID, token)
	if err != nil {
		return nil, err
	}
	if msg := form.CheckAnswer(action, data); msg != "" {
		return nil, apperr.Fail(apperr.CodeInvalidFormData, "%s", msg)
	}
	text, err := json.Marshal(data)
	if err != nil {
		return nil, apperr.Fail(apperr.CodeInvalidFormData, "The inputs cannot be stored: %v", err)
	}
	answer := string(text)
	now := time.Now().UTC()
	f.s.writeMu.Lock()
	res := f.s.db.WithContext(ctx).Model(&models.HumanInputForm{}).
		Where("id = ? AND status = ? AND expires_at > ?", form.ID, workflow.FormWaiting, now).
		Updates(map[string]any{"status": workflow.FormSubmitted, "action_id": action, "submitted_data": answer,
			"submitted_by": user, "submitted_at": now})
	f.s.writeMu.Unlock()
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected == 0 {
		// Someone else answered first, or time ran out in between.
		_, err := f.Open(ctx, appID, token)
		if err == nil {
			err = apperr.Fail(apperr.CodeFormSubmitted, "This form has already been answered.")
		}
		return nil, err
	}
	form.Status, form.ActionID, form.Data = workflow.FormSubmitted, action, data
	return form, nil
}

// OfRun returns the forms of a run by node id.
func (f *Forms) OfRun(ctx context.Context, runID string) (map[string]*workflow.HumanForm, error) {
	var rows []models.HumanInputForm
	if err := f.s.db.WithContext(ctx).Where("workflow_run_id = ?", runID).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]*workflow.HumanForm, len(rows))
	for i := range rows {
		form, err := decodeForm(&rows[i])
		if err != nil {
			return nil, err
		}
		out[form.NodeID] = form.HumanForm
	}
	return out, nil
}

// Waiting returns the forms of a run that still wait for an answer.
func (f *Forms) Waiting(ctx context.Context, runID string) ([]*workflow.HumanForm, error) {
	all, err := f.OfRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	var out []*workflow.HumanForm
	for _, form := range all {
		if form.Status == workflow.FormWaiting {
			out = append(out, form)
		}
	}
	return out, nil
}

// ExpireDue marks the waiting forms whose time ran out as timed out and
// returns the runs they belong to, which can go on along their timeout
// branches.
func (f *Forms) ExpireDue(ctx context.Context, now time.Time) ([]string, error) {
	var runs []string
	f.s.writeMu.Lock()
	defer f.s.writeMu.Unlock()
	err := f.s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		q := tx.Model(&models.HumanInputForm{}).Where("status = ? AND expires_at <= ?", workflow.FormWaiting, now.UTC())
		if err := q.Distinct().Pluck("workflow_run_id", &runs).Error; err != nil {
			return err
		}
		return tx.Model(&models.HumanInputForm{}).Where("status = ? AND expires_at <= ?", workflow.FormWaiting, now.UTC()).
			Update("status", workflow.FormTimeout).Error
	})
	return runs, err
}

// Paused is a paused run ready to go on.
type Paused struct {
	Run      *models.WorkflowRun
	Snapshot *workflow.Snapshot
	Forms    map[string]*workflow.HumanForm
}

// Claim takes a paused run for resuming: it moves the run from paused to
// running, so that only one caller resumes it, and returns what the run
// needs. ok is false when the run is not paused (any more).
func (f *Forms) Claim(ctx context.Context, runID string) (p *Paused, ok bool, err error) {
	f.s.writeMu.Lock()
	res := f.s.db.WithContext(ctx).Model(&models.WorkflowRun{}).
		Where("id = ? AND status = ? AND pause_state IS NOT NULL", runID, workflow.RunPaused).
		// The claiming replica owns the run from here, so no sweep takes
		// it for the run of a dead replica before it resumes.
		Updates(map[string]any{"status": StatusRunning, "replica_id": f.s.replica.OwnerID()})
	f.s.writeMu.Unlock()
	if res.Error != nil || res.RowsAffected == 0 {
		return nil, false, res.Error
	}
	var run models.WorkflowRun
	if err := f.s.db.WithContext(ctx).Where("id = ?", runID).Take(&run).Error; err != nil {
		return nil, false, err
	}
	snap, err := workflow.UnmarshalSnapshot(*run.PauseState)
	if err != nil {
		return nil, false, err
	}
	forms, err := f.OfRun(ctx, runID)
	if err != nil {
		return nil, false, err
	}
	return &Paused{Run: &run, Snapshot: snap, Forms: forms}, true, nil
}
