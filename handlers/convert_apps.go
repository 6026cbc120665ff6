package handlers

import (
	"encoding/json"
	"fmt"

	"appkb/gen"
	"appkb/internal/apps"
)

// Apps, domain → wire.

func wireAppInfo(i apps.AppInfo) gen.AppInfoResponse {
	return gen.AppInfoResponse{Name: i.Name, Description: &i.Description, Tags: listOrNil(i.Tags), Mode: i.Mode, AuthorName: i.AuthorName}
}

// wireParameters maps the /parameters answer to the wire. Every feature
// is sent; the optional text-to-speech settings only when set. A list the
// domain leaves nil is left out.
func wireParameters(p *apps.Parameters) (gen.AppParametersResponse, error) {
	out := gen.AppParametersResponse{
		OpeningStatement:              &p.OpeningStatement,
		SuggestedQuestions:            listOrNil(p.SuggestedQuestions),
		SuggestedQuestionsAfterAnswer: wireSwitch(p.SuggestedQuestionsAfterAnswer),
		SpeechToText:                  wireSwitch(p.SpeechToText),
		RetrieverResource:             wireSwitch(p.RetrieverResource),
		AnnotationReply:               wireSwitch(p.AnnotationReply),
		MoreLikeThis:                  wireSwitch(p.MoreLikeThis),
	}
	out.TextToSpeech = &struct {
		AutoPlay *string `json:"autoPlay,omitempty"`
		Enabled  *bool   `json:"enabled,omitempty"`
		Language *string `json:"language,omitempty"`
		Voice    *string `json:"voice,omitempty"`
	}{AutoPlay: textOrNil(p.TextToSpeech.AutoPlay), Enabled: &p.TextToSpeech.Enabled,
		Language: textOrNil(p.TextToSpeech.Language), Voice: textOrNil(p.TextToSpeech.Voice)}
	out.SensitiveWordAvoidance = &struct {
		Config  *map[string]interface{} `json:"config,omitempty"`
		Enabled *bool                   `json:"enabled,omitempty"`
		Type    *string                 `json:"type,omitempty"`
	}{Enabled: &p.SensitiveWordAvoidance.Enabled}
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
	u := &p.FileUpload
	out.FileUpload = &struct {
		AllowedFileExtensions    *[]string `json:"allowed_file_extensions,omitempty"`
		AllowedFileTypes         *[]string `json:"allowed_file_types,omitempty"`
		AllowedFileUploadMethods *[]string `json:"allowed_file_upload_methods,omitempty"`
		Enabled                  *bool     `json:"enabled,omitempty"`
		Image                    *struct {
			Detail          *string   `json:"detail,omitempty"`
			Enabled         *bool     `json:"enabled,omitempty"`
			NumberLimits    *int      `json:"number_limits,omitempty"`
			TransferMethods *[]string `json:"transfer_methods,omitempty"`
		} `json:"image,omitempty"`
		NumberLimits *int `json:"number_limits,omitempty"`
	}{AllowedFileExtensions: listOrNil(u.AllowedFileExtensions), AllowedFileTypes: listOrNil(u.AllowedFileTypes),
		AllowedFileUploadMethods: listOrNil(u.AllowedFileUploadMethods), Enabled: &u.Enabled, NumberLimits: &u.NumberLimits}
	out.FileUpload.Image = &struct {
		Detail          *string   `json:"detail,omitempty"`
		Enabled         *bool     `json:"enabled,omitempty"`
		NumberLimits    *int      `json:"number_limits,omitempty"`
		TransferMethods *[]string `json:"transfer_methods,omitempty"`
	}{Detail: &u.Image.Detail, Enabled: &u.Image.Enabled, NumberLimits: &u.Image.NumberLimits,
		TransferMethods: listOrNil(u.Image.TransferMethods)}
	sp := &p.SystemParameters
	out.SystemParameters.FileSizeLimit = &sp.FileSizeLimit
	out.SystemParameters.ImageFileSizeLimit = &sp.ImageFileSizeLimit
	out.SystemParameters.AudioFileSizeLimit = &sp.AudioFileSizeLimit
	out.SystemParameters.VideoFileSizeLimit = &sp.VideoFileSizeLimit
	out.SystemParameters.WorkflowFileUploadLimit = &sp.WorkflowFileUploadLimit
	return out, nil
}

// wireSwitch maps a feature switch to the wire.
func wireSwitch(s apps.Switch) *struct {
	Enabled *bool `json:"enabled,omitempty"`
} {
	return &struct {
		Enabled *bool `json:"enabled,omitempty"`
	}{Enabled: &s.Enabled}
}

// textOrNil leaves out text that is empty.
func textOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// wireMeta maps the /meta answer to the wire: a URL icon is a string, an
// emoji icon its background and content.
func wireMeta(m apps.Meta) (gen.AppMetaResponse, error) {
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

// wireSite maps the /site answer to the wire; the settings the domain
// leaves nil are left out.
func wireSite(s apps.Site) gen.WebAppSettingsResponse {
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
