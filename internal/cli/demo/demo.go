// Package demo provides the apps that `appkb serve --demo` installs, so that a
// newcomer has something to call right away.
package demo

import (
	"context"
	_ "embed"

	"appkb/internal/apps"
	"appkb/internal/apps/apikeys"
)

var (
	//go:embed chat.yml
	ChatApp []byte
	//go:embed completion.yml
	CompletionApp []byte
)

// KeyLabel marks the keys made for the demo; each start replaces them.
const KeyLabel = "demo"

// Keys are the demo's fresh credentials.
type Keys struct {
	AppID            string `json:"app_id"`
	AppKey           string `json:"app_key"`
	CompletionAppID  string `json:"completion_app_id"`
	CompletionAppKey string `json:"completion_app_key"`
	KnowledgeKey     string `json:"knowledge_key"`
}

// Ensure installs the demo apps on first use, revokes the keys an earlier
// demo start made, and returns new ones (a key is only ever shown once).
func Ensure(ctx context.Context, appStore *apps.Store, keyStore *apikeys.Store) (*Keys, error) {
	if err := keyStore.RevokeLabelled(ctx, KeyLabel); err != nil {
		return nil, err
	}
	var k Keys
	var err error
	if k.AppID, k.AppKey, err = installWithKey(ctx, appStore, keyStore, ChatApp); err != nil {
		return nil, err
	}
	if k.CompletionAppID, k.CompletionAppKey, err = installWithKey(ctx, appStore, keyStore, CompletionApp); err != nil {
		return nil, err
	}
	if k.KnowledgeKey, err = keyStore.CreateKnowledgeKey(ctx, nil, KeyLabel); err != nil {
		return nil, err
	}
	return &k, nil
}

// installWithKey imports the app unless one of its name exists, and makes a
// fresh demo key for it.
func installWithKey(ctx context.Context, appStore *apps.Store, keyStore *apikeys.Store, file []byte) (appID, key string, err error) {
	def, err := apps.Parse(file)
	if err != nil {
		return "", "", err
	}
	app, err := appStore.FindByName(ctx, def.App.Name)
	if err != nil {
		return "", "", err
	}
	if app == nil {
		if app, err = appStore.Import(ctx, file); err != nil {
			return "", "", err
		}
	}
	key, err = keyStore.CreateAppKey(ctx, app.ID, KeyLabel)
	return app.ID, key, err
}
