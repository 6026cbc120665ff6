package apps

// This file computes what the four app-information operations (/info,
// /parameters, /meta, /site) report. The structs carry the wire field names
// as JSON tags; the HTTP layer only copies them into its own types.

import (
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"appkb/models"
)

// AppInfo is the basic description of an app.
type AppInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Mode        string   `json:"mode"`
	// AuthorName is nil: apps are imported from files, which name no author.
	AuthorName *string `json:"author_name"`
}

// Info describes an app. Apps carry no tags yet, so Tags is empty.
func Info(app *models.App) AppInfo {
	return AppInfo{Name: app.Name, Description: app.Description, Tags: []string{}, Mode: app.Mode}
}

// Parameters is what a client needs to present an app: greeting, feature
// switches, input form and upload limits.
type Parameters struct {
	OpeningStatement              string       `json:"opening_statement"`
	SuggestedQuestions            []string     `json:"suggested_questions"`
	SuggestedQuestionsAfterAnswer Switch       `json:"suggested_questions_after_answer"`
	SpeechToText                  Switch       `json:"speech_to_text"`
	TextToSpeech                  SpeechOutput `json:"text_to_speech"`
	RetrieverResource             Switch       `json:"retriever_resource"`
	AnnotationReply               Switch       `json:"annotation_reply"`
	MoreLikeThis                  Switch       `json:"more_like_this"`
	// SensitiveWordAvoidance only says whether moderation is on; its
	// settings may hold credentials and are not shown.
	SensitiveWordAvoidance Switch           `json:"sensitive_word_avoidance"`
	UserInputForm          []FormItem       `json:"user_input_form"`
	FileUpload             UploadSettings   `json:"file_upload"`
	SystemParameters       SystemParameters `json:"system_parameters"`
}

// Switch is a feature that is on or off.
type Switch struct {
	Enabled bool `json:"enabled"`
}

// SpeechOutput is the text-to-speech setting.
type SpeechOutput struct {
	Enabled  bool   `json:"enabled"`
	Voice    string `json:"voice,omitempty"`
	Language string `json:"language,omitempty"`
	AutoPlay string `json:"autoPlay,omitempty"`
}

// UploadSettings says what files a message may carry. Both layouts are
// filled in, whichever the file used: the general fields and the image block
// older clients read.
type UploadSettings struct {
	Enabled                  bool          `json:"enabled"`
	AllowedFileTypes         []string      `json:"allowed_file_types"`
	AllowedFileExtensions    []string      `json:"allowed_file_extensions"`
	AllowedFileUploadMethods []string      `json:"allowed_file_upload_methods"`
	NumberLimits             int           `json:"number_limits"`
	Image                    ImageSettings `json:"image"`
}

// ImageSettings is the image attachment setting.
type ImageSettings struct {
	Enabled         bool     `json:"enabled"`
	NumberLimits    int      `json:"number_limits"`
	Detail          string   `json:"detail"`
	TransferMethods []string `json:"transfer_methods"`
}

// SystemParameters are the server's upload limits, in MB except
// WorkflowFileUploadLimit, which counts files.
type SystemParameters struct {
	FileSizeLimit           int `json:"file_size_limit"`
	ImageFileSizeLimit      int `json:"image_file_size_limit"`
	AudioFileSizeLimit      int `json:"audio_file_size_limit"`
	VideoFileSizeLimit      int `json:"video_file_size_limit"`
	WorkflowFileUploadLimit int `json:"workflow_file_upload_limit"`
}

// DefaultSystemParameters are the limits a Dify server has out of the box.
var DefaultSystemParameters = SystemParameters{
	FileSizeLimit:           15,
	ImageFileSizeLimit:      10,
	AudioFileSizeLimit:      50,
	VideoFileSizeLimit:      100,
	WorkflowFileUploadLimit: 10,
}

// DefaultFileNumberLimit is how many files a message may carry when the app
// does not say.
const DefaultFileNumberLimit = 3

// defaultTransferMethods allows both ways of passing a file.
var defaultTransferMethods = []string{"remote_url", "local_file"}

// FeatureSwitches returns the app's features from wherever its mode keeps
// them: model_config for easy-UI apps, workflow.features for graph apps, the
// agent block's features for agent apps.
func (d *Definition) FeatureSwitches() Features {
	switch mode := d.App.Mode; {
	case UsesModelConfig(mode) && d.ModelConfig != nil:
		return d.ModelConfig.Features
	case UsesWorkflow(mode) && d.Workflow != nil:
		return d.Workflow.Features.Features
	case mode == ModeAgent:
		var fs FeatureSet
		decodeLoose(d.Agent["features"], &fs)
		return fs.Features
	}
	return Features{}
}

// InputForm returns the app's input form: model_config.user_input_form for
// easy-UI apps, the start node's variables for graph apps.
func (d *Definition) InputForm() []FormField {
	switch mode := d.App.Mode; {
	case UsesModelConfig(mode) && d.ModelConfig != nil:
		return d.ModelConfig.UserInputForm
	case UsesWorkflow(mode):
		return d.Workflow.InputForm()
	case mode == ModeAgent:
		var form []FormField
		decodeLoose(d.Agent["user_input_form"], &form)
		return form
	}
	return nil
}

// decodeLoose decodes a generic value into out through YAML, leaving out
// unchanged when the value does not fit. It serves the agent block, whose
// layout is not settled.
func decodeLoose(v any, out any) {
	if v == nil {
		return
	}
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return
	}
	_ = n.Decode(out)
}

// ParametersFor works out the /parameters answer for an app. Features the
// file does not mention are off, except that an easy-UI app cites its
// sources unless told not to (as Dify does).
func ParametersFor(def *Definition, limits SystemParameters) Parameters {
	f := def.FeatureSwitches()
	easyUI := UsesModelConfig(def.App.Mode)
	p := Parameters{
		OpeningStatement:              f.OpeningStatement,
		SuggestedQuestions:            nonNil(f.SuggestedQuestions),
		SuggestedQuestionsAfterAnswer: Switch{f.SuggestedQuestionsAfterAnswer.On()},
		SpeechToText:                  Switch{f.SpeechToText.On()},
		RetrieverResource:             Switch{f.RetrieverResource.On() || (easyUI && f.RetrieverResource == nil)},
		AnnotationReply:               Switch{f.AnnotationReply != nil && f.AnnotationReply.Enabled},
		MoreLikeThis:                  Switch{f.MoreLikeThis.On()},
		SensitiveWordAvoidance:        Switch{f.SensitiveWordAvoidance != nil && f.SensitiveWordAvoidance.Enabled},
		UserInputForm:                 []FormItem{},
		FileUpload:                    uploadSettings(f.FileUpload),
		SystemParameters:              limits,
	}
	if t := f.TextToSpeech; t != nil {
		p.TextToSpeech = SpeechOutput{Enabled: t.Enabled, Voice: t.Voice, Language: t.Language, AutoPlay: t.AutoPlay}
	}
	for _, field := range def.InputForm() {
		if item, ok := field.Item(); ok {
			p.UserInputForm = append(p.UserInputForm, item)
		}
	}
	return p
}

// uploadSettings fills in both upload layouts from whichever the file has.
func uploadSettings(u *FileUpload) UploadSettings {
	out := UploadSettings{
		AllowedFileTypes:         []string{},
		AllowedFileExtensions:    []string{},
		AllowedFileUploadMethods: slices.Clone(defaultTransferMethods),
		NumberLimits:             DefaultFileNumberLimit,
		Image: ImageSettings{
			NumberLimits:    DefaultFileNumberLimit,
			Detail:          "high",
			TransferMethods: slices.Clone(defaultTransferMethods),
		},
	}
	if u == nil {
		return out
	}
	if u.Enabled != nil {
		out.Enabled = *u.Enabled
	}
	if u.AllowedFileTypes != nil {
		out.AllowedFileTypes = u.AllowedFileTypes
	}
	if u.AllowedFileExtensions != nil {
		out.AllowedFileExtensions = u.AllowedFileExtensions
	}
	if len(u.AllowedFileUploadMethods) > 0 {
		out.AllowedFileUploadMethods = u.AllowedFileUploadMethods
	}
	if u.NumberLimits != nil && *u.NumberLimits > 0 {
		out.NumberLimits = *u.NumberLimits
	}
	if img := u.Image; img != nil {
		out.Image.Enabled = img.Enabled
		if img.NumberLimits > 0 {
			out.Image.NumberLimits = img.NumberLimits
		}
		if img.Detail != "" {
			out.Image.Detail = img.Detail
		}
		if len(img.TransferMethods) > 0 {
			out.Image.TransferMethods = img.TransferMethods
		}
	} else {
		out.Image.Enabled = out.Enabled && slices.Contains(out.AllowedFileTypes, "image")
		out.Image.NumberLimits = out.NumberLimits
		out.Image.TransferMethods = out.AllowedFileUploadMethods
	}
	return out
}

// Meta is the display data of the tools an app uses.
type Meta struct {
	// ToolIcons maps a tool name to an icon URL (string) or a ToolIcon.
	ToolIcons map[string]any `json:"tool_icons"`
}

// ToolIcon is an emoji icon on a coloured background.
type ToolIcon struct {
	Background string `json:"background"`
	Content    string `json:"content"`
}

// DefaultIconBackground is used behind an emoji icon that names no colour.
const DefaultIconBackground = "#252525"

// MetaFor lists the icons of the app's tools: the agent tools of an easy-UI
// app, the tool nodes and the tools of agent nodes of a graph app. Only
// tools whose definition carries an icon are listed, since appkb serves no
// icons of its own.
func MetaFor(def *Definition) Meta {
	icons := map[string]any{}
	add := func(tool string, fields map[string]any) {
		if tool == "" {
			return
		}
		if icon, ok := toolIcon(fields); ok {
			icons[tool] = icon
		}
	}
	addTools := func(list any) {
		items, _ := list.([]any)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				add(asString(m["tool_name"]), m)
			}
		}
	}
	switch mode := def.App.Mode; {
	case UsesModelConfig(mode) && def.ModelConfig != nil:
		for _, t := range def.ModelConfig.AgentMode.Tools {
			add(t.ToolName, t.Extra)
		}
	case UsesWorkflow(mode):
		for _, n := range def.Workflow.NodesOfKind(NodeTool) {
			add(asString(n.Data["tool_name"]), n.Data)
		}
		for _, n := range def.Workflow.NodesOfKind(NodeAgent) {
			params, _ := n.Data["agent_parameters"].(map[string]any)
			tools, _ := params["tools"].(map[string]any)
			addTools(tools["value"])
		}
	case mode == ModeAgent:
		addTools(def.Agent["tools"])
	}
	return Meta{ToolIcons: icons}
}

// toolIcon finds an icon among a tool's settings. A URL is returned as is,
// an emoji becomes a ToolIcon, and so does an {background, content} map.
func toolIcon(fields map[string]any) (any, bool) {
	for _, key := range []string{"provider_icon", "icon", "tool_icon"} {
		switch v := fields[key].(type) {
		case string:
			v = strings.TrimSpace(v)
			switch {
			case strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://"):
				return v, true
			case isEmoji(v):
				return ToolIcon{Background: DefaultIconBackground, Content: v}, true
			}
		case map[string]any:
			content := asString(v["content"])
			if content == "" {
				continue
			}
			bg := asString(v["background"])
			if bg == "" {
				bg = DefaultIconBackground
			}
			return ToolIcon{Background: bg, Content: content}, true
		}
	}
	return nil, false
}

// isEmoji reports whether s looks like an emoji: short, and not plain ASCII
// (which would rather be an icon name or a path this server cannot serve).
func isEmoji(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if r >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// Site is the look of the app's hosted web page.
type Site struct {
	Title                  string  `json:"title"`
	ChatColorTheme         *string `json:"chat_color_theme"`
	ChatColorThemeInverted bool    `json:"chat_color_theme_inverted"`
	IconType               string  `json:"icon_type"`
	Icon                   string  `json:"icon"`
	IconBackground         string  `json:"icon_background"`
	IconURL                *string `json:"icon_url"`
	Description            string  `json:"description"`
	Copyright              *string `json:"copyright"`
	PrivacyPolicy          *string `json:"privacy_policy"`
	InputPlaceholder       *string `json:"input_placeholder"`
	CustomDisclaimer       string  `json:"custom_disclaimer"`
	DefaultLanguage        string  `json:"default_language"`
	ShowWorkflowSteps      bool    `json:"show_workflow_steps"`
	UseIconAsAnswerIcon    bool    `json:"use_icon_as_answer_icon"`
}

// DefaultLanguage is the language of an app's web page.
const DefaultLanguage = "en-US"

// SiteFor describes the app's web page. Definition files carry no site
// settings, so the page takes the app's name, icon and description and
// otherwise the settings a new Dify site starts with: no colour theme,
// English, workflow steps shown. An icon of type link is also its URL.
func SiteFor(app *models.App, def *Definition) Site {
	s := Site{
		Title:             app.Name,
		IconType:          app.IconType,
		Icon:              app.Icon,
		IconBackground:    app.IconBackground,
		Description:       app.Description,
		DefaultLanguage:   DefaultLanguage,
		ShowWorkflowSteps: true,
	}
	if s.IconType == "" {
		s.IconType = "emoji"
	}
	if s.IconBackground == "" {
		s.IconBackground = "#FFFFFF"
	}
	if s.IconType == "link" && (strings.HasPrefix(s.Icon, "https://") || strings.HasPrefix(s.Icon, "http://")) {
		url := s.Icon
		s.IconURL = &url
	}
	if def != nil && def.App != nil {
		s.UseIconAsAnswerIcon = def.App.UseIconAsAnswerIcon
	}
	return s
}
