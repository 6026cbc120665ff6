package documents

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"gorm.io/gorm"

	"appkb/internal/knowledge/textsplit"
)

// rebuildKeywords carries out the pending rebuilds of keyword_rebuilds
// (migration 0025): the stored keywords of every chunk with Chinese or
// Japanese text are computed again with the current textsplit.Keywords.
// It goes through the chunks a batch at a time in seq order, recording its
// progress, so that searches keep being served and a restart resumes.
// Another process doing the same meanwhile does no harm: both write the
// same keywords.
func rebuildKeywords(ctx context.Context, gdb *gorm.DB, log *slog.Logger) error {
	var pending []struct {
		Name    string
		NextSeq int64
		LastSeq *int64
	}
	if err := gdb.WithContext(ctx).Raw(`SELECT name, next_seq, last_seq FROM keyword_rebuilds WHERE NOT done ORDER BY name`).
		Scan(&pending).Error; err != nil {
		return fmt.Errorf("keyword rebuild: %w", err)
	}
	for _, p := range pending {
		// Chunks after last_seq were made with the current keywords.
		last := int64(math.MaxInt64)
		if p.LastSeq != nil {
			last = *p.LastSeq
		}
		var total int64
		if err := gdb.WithContext(ctx).Raw(`SELECT COUNT(*) FROM segments WHERE seq > ? AND seq <= ?`, p.NextSeq, last).Scan(&total).Error; err != nil {
			return fmt.Errorf("keyword rebuild: %w", err)
		}
		start, seen, changed := time.Now(), int64(0), 0
		log.Info("indexing: rebuilding chunk keywords", "rebuild", p.Name, "chunks_left", total)
		next := p.NextSeq
		for {
			var rows []struct {
				Seq             int64
				ID              string
				Content, Answer string
				Keywords        string
			}
			if err := gdb.WithContext(ctx).Raw(`SELECT seq, id, content, answer, keywords FROM segments
				WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`, next, last, rekeywordBatch).Scan(&rows).Error; err != nil {
				return fmt.Errorf("keyword rebuild: %w", err)
			}
			if len(rows) == 0 {
				break
			}
			err := gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				for _, r := range rows {
					if !hasCJK(r.Content) && !hasCJK(r.Answer) {
						continue
					}
					kw := keywordsJSON(textsplit.Keywords(r.Content+"\n"+r.Answer, 10))
					if kw == r.Keywords {
						continue
					}
					if err := tx.Exec(`UPDATE segments SET keywords = ? WHERE seq = ?`, kw, r.Seq).Error; err != nil {
						return err
					}
					changed++
				}
				next = rows[len(rows)-1].Seq
				return tx.Exec(`UPDATE keyword_rebuilds SET next_seq = ? WHERE name = ?`, next, p.Name).Error
			})
			if err != nil {
				return fmt.Errorf("keyword rebuild: %w", err)
			}
			seen += int64(len(rows))
			log.Debug("indexing: rebuilding chunk keywords", "rebuild", p.Name, "chunks_done", seen, "chunks_left", max(total-seen, 0))
		}
		if err := gdb.WithContext(ctx).Exec(`UPDATE keyword_rebuilds SET done = TRUE WHERE name = ?`, p.Name).Error; err != nil {
			return fmt.Errorf("keyword rebuild: %w", err)
		}
		log.Info("indexing: rebuilt chunk keywords", "rebuild", p.Name, "chunks", seen, "changed", changed, "took", time.Since(start))
	}
	return nil
}

// rekeywordBatch is how many chunks one step of a keyword rebuild reads.
const rekeywordBatch = 500

// hasCJK tells whether s holds Chinese or Japanese text.
func hasCJK(s string) bool {
	for _, r := range s {
		if r >= 0x2E80 && textsplit.IsCJK(r) {
			return true
		}
	}
	return false
}

// rebuildScope is what the pending keyword rebuilds have left: the chunks
// after next (the last one done) up to last (math.MaxInt64 for no bound);
// ok is false when none is pending. With several pending, the one least
// advanced counts.
func rebuildScope(ctx context.Context, gdb *gorm.DB) (next, last int64, ok bool, err error) {
	var pending []struct {
		NextSeq int64
		LastSeq *int64
	}
	if err := gdb.WithContext(ctx).Raw(`SELECT next_seq, last_seq FROM keyword_rebuilds WHERE NOT done`).Scan(&pending).Error; err != nil {
		return 0, 0, false, err
	}
	for i, p := range pending {
		l := int64(math.MaxInt64)
		if p.LastSeq != nil {
			l = *p.LastSeq
		}
		if i == 0 || p.NextSeq < next {
			next = p.NextSeq
		}
		last = max(last, l)
	}
	return next, last, len(pending) > 0, nil
}

// rebuildProgress adjusts the reported status of documents whose Chinese
// or Japanese chunks a pending keyword rebuild has not reached yet: they
// are reported as being indexed, with the chunks done (all but those) out
// of all their chunks, until the rebuild has gone past them. Searches keep
// returning them meanwhile; their stored status stays completed.
func rebuildProgress(ctx context.Context, gdb *gorm.DB, out []IndexingStatus) error {
	var ids []string
	for _, st := range out {
		if st.IndexingStatus == StatusCompleted {
			ids = append(ids, st.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	next, last, ok, err := rebuildScope(ctx, gdb)
	if err != nil || !ok {
		return err
	}
	var rows []struct {
		DocumentID      string
		Content, Answer string
	}
	if err := gdb.WithContext(ctx).Raw(`SELECT document_id, content, answer FROM segments
		WHERE document_id IN ? AND seq > ? AND seq <= ?`, ids, next, last).Scan(&rows).Error; err != nil {
		return err
	}
	left := map[string]int{}
	for _, r := range rows {
		if hasCJK(r.Content) || hasCJK(r.Answer) {
			left[r.DocumentID]++
		}
	}
	if len(left) == 0 {
		return nil
	}
	var counts []struct {
		DocumentID string
		N          int
	}
	if err := gdb.WithContext(ctx).Raw(`SELECT document_id, COUNT(*) AS n FROM segments WHERE document_id IN ? GROUP BY document_id`,
		ids).Scan(&counts).Error; err != nil {
		return err
	}
	total := map[string]int{}
	for _, c := range counts {
		total[c.DocumentID] = c.N
	}
	for i := range out {
		n := left[out[i].ID]
		if n == 0 || out[i].IndexingStatus != StatusCompleted {
			continue
		}
		out[i].IndexingStatus = StatusIndexing
		out[i].CompletedAt = nil
		out[i].TotalSegments = total[out[i].ID]
		out[i].CompletedSegments = max(0, total[out[i].ID]-n)
	}
	return nil
}
