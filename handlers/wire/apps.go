package wire

import (
	"encoding/json"
	"fmt"

	"appkb/gen"
	"appkb/internal/apps"
)

// Apps, domain → wire.

func AppInfo(i apps.AppInfo) gen.AppInfoResponse {
	return gen.AppInfoResponse{Name: i.Name, Description: &i.Description, Tags: listOrNil(i.Tags), Mode: i.Mode, AuthorName: i.AuthorName}
}

// Parameters maps the /parameters answer to the wire. Every feature
// is sent; the optional text-to-speech settings only when set. A list the
// domain leaves nil is left out.
func Parameters(p *apps.Parameters) (gen.AppParametersResponse, error) {
	out := gen.AppParametersResponse{OpeningStatement: &p.OpeningStatement, SuggestedQuestions: listOrNil(p.SuggestedQuestions)}
	alloc(&out.SuggestedQuestionsAfterAnswer).Enabled = &p.SuggestedQuestionsAfterAnswer.Enabled
	alloc(&out.SpeechToText).Enabled = &p.SpeechToText.Enabled
	tts := alloc(&out.TextToSpeech)
	tts.AutoPlay, tts.Enabled = textOrNil(p.TextToSpeech.AutoPlay), &p.TextToSpeech.Enabled
	tts.Language, tts.Voice = textOrNil(p.TextToSpeech.Language), textOrNil(p.TextToSpeech.Voice)
	alloc(&out.RetrieverResource).Enabled = &p.RetrieverResource.Enabled
	alloc(&out.AnnotationReply).Enabled = &p.AnnotationReply.Enabled
	alloc(&out.MoreLikeThis).Enabled = &p.MoreLikeThis.Enabled
	alloc(&out.SensitiveWordAvoidance).Enabled = &p.SensitiveWordAvoidance.Enabled
	if p.UserInputForm != nil {
		out.UserInputForm = make([]gen.UserInputFormItem, len(p.UserInputForm))
	}
	for i, item := range p.UserInputForm {
		// The form items are open maps (a field's settings vary by kind);
		// their encoding is the union's content, as the spec's variants
		// would reorder or drop keys.
		b, err := json.Marshal(item)
		if err != nil {
			return out, fmt.Errorf("encode form item: %w", err)
		}
		if err := out.UserInputForm[i].UnmarshalJSON(b); err != nil {
			return out, err
		}
	}
	u, fu := &p.FileUpload, alloc(&out.FileUpload)
	fu.AllowedFileExtensions, fu.AllowedFileTypes = listOrNil(u.AllowedFileExtensions), listOrNil(u.AllowedFileTypes)
	fu.AllowedFileUploadMethods, fu.Enabled, fu.NumberLimits = listOrNil(u.AllowedFileUploadMethods), &u.Enabled, &u.NumberLimits
	img := alloc(&fu.Image)
	img.Detail, img.Enabled, img.NumberLimits = &u.Image.Detail, &u.Image.Enabled, &u.Image.NumberLimits
	img.TransferMethods = listOrNil(u.Image.TransferMethods)
	sp, wsp := &p.SystemParameters, &out.SystemParameters
	wsp.FileSizeLimit, wsp.ImageFileSizeLimit, wsp.AudioFileSizeLimit = &sp.FileSizeLimit, &sp.ImageFileSizeLimit, &sp.AudioFileSizeLimit
	wsp.VideoFileSizeLimit, wsp.WorkflowFileUploadLimit = &sp.VideoFileSizeLimit, &sp.WorkflowFileUploadLimit
	return out, nil
}

// alloc points *field at a new zero value and returns it, so that the
// generated types' anonymous structs need not be spelled out.
func alloc[T any](field **T) *T {
	*field = new(T)
	return *field
}

// textOrNil leaves out text that is empty.
func textOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Meta maps the /meta answer to the wire: a URL icon is a string, an
// emoji icon its background and content.
func Meta(m apps.Meta) (gen.AppMetaResponse, error) {
	if m.ToolIcons == nil {
		return gen.AppMetaResponse{}, nil
	}
	icons := make(map[string]gen.AppMetaResponse_ToolIcons_AdditionalProperties, len(m.ToolIcons))
	for name, v := range m.ToolIcons {
		var icon gen.AppMetaResponse_ToolIcons_AdditionalProperties
		var err error
		switch v := v.(type) {
		case string:
			err = icon.FromAppMetaResponseToolIcons0(v)
		case apps.ToolIcon:
			err = icon.FromToolIconDetail(gen.ToolIconDetail{Background: &v.Background, Content: &v.Content})
		default:
			var b []byte
			if b, err = json.Marshal(v); err == nil {
				err = icon.UnmarshalJSON(b)
			}
		}
		if err != nil {
			return gen.AppMetaResponse{}, err
		}
		icons[name] = icon
	}
	return gen.AppMetaResponse{ToolIcons: &icons}, nil
}

// Site maps the /site answer to the wire; the settings the domain
// leaves nil are left out.
func Site(s apps.Site) gen.WebAppSettingsResponse {
	return gen.WebAppSettingsResponse{
		Title:                  s.Title,
		ChatColorTheme:         s.ChatColorTheme,
		ChatColorThemeInverted: &s.ChatColorThemeInverted,
		IconType:               &s.IconType,
		Icon:                   &s.Icon,
		IconBackground:         &s.IconBackground,
		IconUrl:                s.IconURL,
		Description:            &s.Description,
		Copyright:              s.Copyright,
		PrivacyPolicy:          s.PrivacyPolicy,
		InputPlaceholder:       s.InputPlaceholder,
		CustomDisclaimer:       &s.CustomDisclaimer,
		DefaultLanguage:        &s.DefaultLanguage,
		ShowWorkflowSteps:      &s.ShowWorkflowSteps,
		UseIconAsAnswerIcon:    &s.UseIconAsAnswerIcon,
	}
}
