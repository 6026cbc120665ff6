package wire

import (
	"os"
	"path/filepath"
	"testing"

	"appkb/gen"
	"appkb/internal/apps"
	"appkb/models"
)

// The app-information converters answer byte for byte what toWire
// answered, for the example apps of every mode (testdata/apps) and for
// hand-made values with the optional parts set and unset.
func TestAppConvertersMatchToWire(t *testing.T) {
	files := []string{"chat.yml", "completion.yml", "workflow.yml", "advanced-chat.yml", "agent.yml",
		"agent-chat.yml", "legacy-chat-unversioned.yml", "legacy-chatflow-0.1.0.yml"}
	type sample struct {
		name   string
		params apps.Parameters
		meta   apps.Meta
		site   apps.Site
	}
	var samples []sample
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "apps", f))
		if err != nil {
			t.Fatal(err)
		}
		def, err := apps.Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		app := &models.App{Name: def.App.Name, Mode: def.App.Mode, Description: def.App.Description,
			Icon: def.App.Icon, IconType: def.App.IconType, IconBackground: def.App.IconBackground}
		samples = append(samples, sample{f, apps.ParametersFor(def, apps.DefaultSystemParameters), apps.MetaFor(def), apps.SiteFor(app, def)})
	}
	theme, html := "#1C64F2", "<b>&</b>"
	samples = append(samples,
		sample{name: "zero values"},
		sample{name: "everything set",
			params: apps.Parameters{OpeningStatement: html, SuggestedQuestions: []string{"a", html},
				TextToSpeech:  apps.SpeechOutput{Enabled: true, Voice: "alloy", Language: "en", AutoPlay: "enabled"},
				UserInputForm: []apps.FormItem{{"number": {"variable": "n", "default": 1.5, "max": 1e21, "options": nil}}, nil, {}},
				FileUpload: apps.UploadSettings{Enabled: true, AllowedFileTypes: []string{}, AllowedFileExtensions: []string{".md"},
					Image: apps.ImageSettings{Detail: "low", TransferMethods: []string{}}}},
			meta: apps.Meta{ToolIcons: map[string]any{"b": "https://x/i.png?a=1&b=<2>", "a": apps.ToolIcon{Background: "", Content: "🔧"},
				"other": map[string]any{"z": 1, "a": html}}},
			site: apps.Site{Title: html, ChatColorTheme: &theme, IconURL: &theme, Copyright: &html, PrivacyPolicy: &html,
				InputPlaceholder: &theme, UseIconAsAnswerIcon: true}},
		sample{name: "empty lists and map", meta: apps.Meta{ToolIcons: map[string]any{}},
			params: apps.Parameters{SuggestedQuestions: []string{}, UserInputForm: []apps.FormItem{}}},
	)
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			params, err := Parameters(&s.params)
			if err != nil {
				t.Fatal(err)
			}
			want, err := toWire[gen.AppParametersResponse](s.params)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "parameters", params, want)

			meta, err := Meta(s.meta)
			if err != nil {
				t.Fatal(err)
			}
			wantMeta, err := toWire[gen.AppMetaResponse](s.meta)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "meta", meta, wantMeta)

			wantSite, err := toWire[gen.WebAppSettingsResponse](s.site)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "site", Site(s.site), wantSite)
		})
	}
}
