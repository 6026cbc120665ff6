// Package demo provides the app that `appkb serve --demo` installs, so that a
// newcomer has something to call right away.
package demo

import (
	"context"
	_ "embed"

	"appkb/apikeys"
	"appkb/apps"
)

//go:embed chat.yml
var ChatApp []byte

// KeyLabel marks the keys made for the demo; each start replaces them.
const KeyLabel = "demo"

// Keys are the demo's fresh credentials.
type Keys struct {
	AppID        string `json:"app_id"`
	AppKey       string `json:"app_key"`
	KnowledgeKey string `json:"knowledge_key"`
}

// Ensure installs the demo app if it is missing, revokes the keys an earlier
// demo start made, and returns new ones (keys are only ever shown once).
func Ensure(ctx context.Context, appStore *apps.Store, keyStore *apikeys.Store) (*Keys, error) {
	def, err := apps.Parse(ChatApp)
	if err != nil {
		return nil, err
	}
	app, err := appStore.FindByName(ctx, def.App.Name)
	if err != nil {
		return nil, err
	}
	if app == nil {
		if app, err = appStore.Import(ctx, ChatApp); err != nil {
			return nil, err
		}
	}
	if err := keyStore.RevokeLabelled(ctx, KeyLabel); err != nil {
		return nil, err
	}
	appKey, err := keyStore.CreateAppKey(ctx, app.ID, KeyLabel)
	if err != nil {
		return nil, err
	}
	kbKey, err := keyStore.CreateKnowledgeKey(ctx, nil, KeyLabel)
	if err != nil {
		return nil, err
	}
	return &Keys{AppID: app.ID, AppKey: appKey, KnowledgeKey: kbKey}, nil
}
