package demo

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"gorm.io/gorm"

	"appkb/internal/apps"
	"appkb/internal/knowledge/datasets"
	"appkb/internal/knowledge/documents"
	"appkb/internal/llm"
	"appkb/models"
)

// KnowledgeName is the name of the demo's knowledge base.
const KnowledgeName = "appkb demo handbook"

//go:embed handbook/*.md
var handbook embed.FS

// BicycleQuestion is a question the demo handbook answers (the demo prints
// it as an example).
const BicycleQuestion = "Where can I park my bicycle?"

// EnsureKnowledge makes the demo knowledge base on first use (a small staff
// handbook, indexed by the server's workers with the built-in model) and
// points the demo chat app at it, so that the chat answers from the
// handbook and cites it. It returns the knowledge base's id.
func EnsureKnowledge(ctx context.Context, gdb *gorm.DB, registry *llm.Registry, dataDir string, appStore *apps.Store, chatAppID string) (string, error) {
	var ds models.Dataset
	err := gdb.WithContext(ctx).Where("name = ?", KnowledgeName).Take(&ds).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		id, err := makeHandbook(ctx, gdb, registry, dataDir)
		if err != nil {
			return "", err
		}
		ds.ID = id
	case err != nil:
		return "", err
	}
	def, err := appStore.Export(ctx, chatAppID)
	if err != nil {
		return "", err
	}
	if !bytes.Contains(def, []byte(ds.ID)) {
		if _, err := appStore.Replace(ctx, chatAppID, ChatAppWithKnowledge(ds.ID)); err != nil {
			return "", fmt.Errorf("point the demo chat at its knowledge base: %w", err)
		}
	}
	return ds.ID, nil
}

// ChatAppWithKnowledge is the demo chat app answering from knowledge base
// datasetID.
func ChatAppWithKnowledge(datasetID string) []byte {
	s := strings.Replace(string(ChatApp), "      datasets: []",
		"      datasets:\n      - dataset:\n          enabled: true\n          id: "+datasetID, 1)
	s = strings.Replace(s, "    - What is appkb?", "    - "+BicycleQuestion, 1)
	return []byte(s)
}

func makeHandbook(ctx context.Context, gdb *gorm.DB, registry *llm.Registry, dataDir string) (string, error) {
	actor := datasets.Actor{KeyID: KeyLabel}
	technique := "high_quality"
	desc := "A small staff handbook the demo chat app answers from."
	ds, err := datasets.NewStore(gdb, registry).CreateDataset(ctx, actor, datasets.CreateParams{
		Name: KnowledgeName, Description: &desc, IndexingTechnique: &technique})
	if err != nil {
		return "", fmt.Errorf("demo knowledge base: %w", err)
	}
	svc := documents.NewService(gdb, registry, dataDir)
	files, err := fs.Glob(handbook, "handbook/*.md")
	if err != nil {
		return "", err
	}
	for _, f := range files {
		text, err := handbook.ReadFile(f)
		if err != nil {
			return "", err
		}
		if _, err := svc.CreateFromText(ctx, actor, ds.ID, path.Base(f), string(text), documents.Settings{IndexingTechnique: &technique}); err != nil {
			return "", fmt.Errorf("demo knowledge base, %s: %w", f, err)
		}
	}
	return ds.ID, nil
}
