package documents

import (
	"context"
	"fmt"
	"log/slog"
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
	}
	if err := gdb.WithContext(ctx).Raw(`SELECT name, next_seq FROM keyword_rebuilds WHERE NOT done ORDER BY name`).
		Scan(&pending).Error; err != nil {
		return fmt.Errorf("keyword rebuild: %w", err)
	}
	for _, p := range pending {
		var total int64
		if err := gdb.WithContext(ctx).Raw(`SELECT COUNT(*) FROM segments WHERE seq > ?`, p.NextSeq).Scan(&total).Error; err != nil {
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
				WHERE seq > ? ORDER BY seq LIMIT ?`, next, rekeywordBatch).Scan(&rows).Error; err != nil {
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
