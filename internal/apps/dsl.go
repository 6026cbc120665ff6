package apps

// This file holds the typed form of an app definition file. Every struct
// keeps the keys it does not know in an Extra map, so nothing in the file is
// lost when it is read; the file text itself is stored unchanged as well.
//
// Values are normalised while they are read: where Dify has written the same
// setting under two spellings over the years, the struct field holds it
// whichever spelling the file used (see the UnmarshalYAML methods).

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// Definition is a parsed app definition file.
type Definition struct {
	// Version is the DSL version the file declares; "0.1.0" when it has none.
	Version string `yaml:"version"`
	// Kind is always "app" after parsing.
	Kind string      `yaml:"kind"`
	App  *AppSection `yaml:"app"`
	// ModelConfig configures completion, chat and agent-chat apps.
	ModelConfig *ModelConfig `yaml:"model_config,omitempty"`
	// Workflow configures workflow and advanced-chat (chatflow) apps.
	Workflow *Workflow `yaml:"workflow,omitempty"`
	// Agent and AgentPackages belong to agent apps (DSL 0.7). Their layout
	// is not settled, so they are kept as read.
	Agent         map[string]any `yaml:"agent,omitempty"`
	AgentPackages any            `yaml:"agent_packages,omitempty"`
	// Dependencies lists the plugins the app was built with.
	Dependencies []Dependency   `yaml:"dependencies,omitempty"`
	Extra        map[string]any `yaml:",inline"`
}

// AppSection is the `app` block: what the app is called and how it looks.
type AppSection struct {
	Name        string `yaml:"name"`
	Mode        string `yaml:"mode"`
	Description string `yaml:"description"`
	Icon        string `yaml:"icon"`
	// IconType is emoji, image or link; anything else reads as emoji.
	IconType string `yaml:"icon_type"`
	// IconBackground defaults to white.
	IconBackground      string         `yaml:"icon_background"`
	UseIconAsAnswerIcon bool           `yaml:"use_icon_as_answer_icon"`
	Extra               map[string]any `yaml:",inline"`
}

// Dependency is one plugin an app needs (marketplace, package or github).
type Dependency struct {
	Type              string         `yaml:"type"`
	Value             map[string]any `yaml:"value"`
	CurrentIdentifier any            `yaml:"current_identifier"`
	Extra             map[string]any `yaml:",inline"`
}

// ModelConfig is the configuration of a completion, chat or agent-chat app.
type ModelConfig struct {
	Model ModelSpec `yaml:"model"`
	// PrePrompt is the prompt of a simple-mode app, with {{variable}}
	// placeholders for the input form.
	PrePrompt string `yaml:"pre_prompt"`
	// PromptType is "simple" (also when the file leaves it out) or "advanced".
	PromptType             string                 `yaml:"prompt_type"`
	ChatPromptConfig       ChatPromptConfig       `yaml:"chat_prompt_config"`
	CompletionPromptConfig CompletionPromptConfig `yaml:"completion_prompt_config"`
	UserInputForm          []FormField            `yaml:"user_input_form"`
	// DatasetQueryVariable names the input used as the retrieval query of a
	// completion app.
	DatasetQueryVariable string           `yaml:"dataset_query_variable"`
	ExternalDataTools    []map[string]any `yaml:"external_data_tools"`
	DatasetConfigs       DatasetConfigs   `yaml:"dataset_configs"`
	AgentMode            AgentMode        `yaml:"agent_mode"`
	Features             `yaml:",inline"`
	Extra                map[string]any `yaml:",inline"`
}

// ModelSpec names a model and the parameters it is called with.
type ModelSpec struct {
	// Provider is either a short name ("openai") or a plugin id
	// ("langgenius/openai/openai"); ProviderName gives the short one.
	Provider         string         `yaml:"provider"`
	Name             string         `yaml:"name"`
	Mode             string         `yaml:"mode"`
	CompletionParams map[string]any `yaml:"completion_params"`
	Extra            map[string]any `yaml:",inline"`
}

// ProviderName returns the provider without its plugin prefix: both
// "openai" and "langgenius/openai/openai" give "openai".
func (m ModelSpec) ProviderName() string {
	p := strings.Trim(m.Provider, "/")
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

// ChatPromptConfig is the message list of an advanced-mode app on a chat model.
type ChatPromptConfig struct {
	Prompt []PromptMessage `yaml:"prompt"`
	Extra  map[string]any  `yaml:",inline"`
}

// PromptMessage is one message of an advanced prompt.
type PromptMessage struct {
	Role  string         `yaml:"role"`
	Text  string         `yaml:"text"`
	Extra map[string]any `yaml:",inline"`
}

// CompletionPromptConfig is the prompt of an advanced-mode app on a
// completion model.
type CompletionPromptConfig struct {
	Prompt struct {
		Text  string         `yaml:"text"`
		Extra map[string]any `yaml:",inline"`
	} `yaml:"prompt"`
	ConversationHistoriesRole struct {
		UserPrefix      string         `yaml:"user_prefix"`
		AssistantPrefix string         `yaml:"assistant_prefix"`
		Extra           map[string]any `yaml:",inline"`
	} `yaml:"conversation_histories_role"`
	Extra map[string]any `yaml:",inline"`
}

// Features are the optional behaviours an app switches on. Easy-UI apps keep
// them inside model_config, graph apps under workflow.features. A nil
// pointer means the file does not mention the feature.
type Features struct {
	OpeningStatement              string           `yaml:"opening_statement"`
	SuggestedQuestions            []string         `yaml:"suggested_questions"`
	SuggestedQuestionsAfterAnswer *Toggle          `yaml:"suggested_questions_after_answer"`
	SpeechToText                  *Toggle          `yaml:"speech_to_text"`
	TextToSpeech                  *TextToSpeech    `yaml:"text_to_speech"`
	RetrieverResource             *Toggle          `yaml:"retriever_resource"`
	AnnotationReply               *AnnotationReply `yaml:"annotation_reply"`
	MoreLikeThis                  *Toggle          `yaml:"more_like_this"`
	SensitiveWordAvoidance        *Moderation      `yaml:"sensitive_word_avoidance"`
	FileUpload                    *FileUpload      `yaml:"file_upload"`
}

// FeatureSet is a graph app's `features` block.
type FeatureSet struct {
	Features `yaml:",inline"`
	Extra    map[string]any `yaml:",inline"`
}

// Toggle is a feature that is only switched on or off.
type Toggle struct {
	Enabled bool           `yaml:"enabled"`
	Extra   map[string]any `yaml:",inline"`
}

// On reports whether the toggle exists and is enabled.
func (t *Toggle) On() bool { return t != nil && t.Enabled }

// TextToSpeech configures reading answers aloud.
type TextToSpeech struct {
	Enabled  bool   `yaml:"enabled"`
	Voice    string `yaml:"voice"`
	Language string `yaml:"language"`
	// AutoPlay is "enabled" or "disabled".
	AutoPlay string         `yaml:"autoPlay"`
	Extra    map[string]any `yaml:",inline"`
}

// AnnotationReply configures answering from stored annotations.
type AnnotationReply struct {
	Enabled        bool     `yaml:"enabled"`
	ID             string   `yaml:"id"`
	ScoreThreshold *float64 `yaml:"score_threshold"`
	EmbeddingModel struct {
		ProviderName string         `yaml:"embedding_provider_name"`
		ModelName    string         `yaml:"embedding_model_name"`
		Extra        map[string]any `yaml:",inline"`
	} `yaml:"embedding_model"`
	Extra map[string]any `yaml:",inline"`
}

// Moderation configures the screening of inputs and answers.
type Moderation struct {
	Enabled bool `yaml:"enabled"`
	// Type is keywords, openai_moderation or api.
	Type string `yaml:"type"`
	// Config holds the method's settings, read from `config` or, as some
	// exports spell it, `configs`.
	Config map[string]any `yaml:"-"`
	Extra  map[string]any `yaml:",inline"`
}

// UnmarshalYAML reads the settings under either spelling.
func (m *Moderation) UnmarshalYAML(n *yaml.Node) error {
	type plain Moderation
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	// The default export writes `configs: []`; a mapping under either name
	// is the configuration itself.
	for _, key := range []string{"config", "configs"} {
		switch v := p.Extra[key].(type) {
		case map[string]any:
			if p.Config == nil {
				p.Config = v
				delete(p.Extra, key)
			}
		case []any, nil:
			delete(p.Extra, key)
		}
	}
	*m = Moderation(p)
	return nil
}

// FileUpload says what files an end user may attach.
type FileUpload struct {
	Enabled               *bool    `yaml:"enabled"`
	AllowedFileTypes      []string `yaml:"allowed_file_types"`
	AllowedFileExtensions []string `yaml:"allowed_file_extensions"`
	// AllowedFileUploadMethods holds remote_url and/or local_file.
	AllowedFileUploadMethods []string       `yaml:"allowed_file_upload_methods"`
	NumberLimits             *int           `yaml:"number_limits"`
	Image                    *ImageUpload   `yaml:"image"`
	Extra                    map[string]any `yaml:",inline"`
}

// ImageUpload is the image-only upload setting older files carry.
type ImageUpload struct {
	Enabled         bool           `yaml:"enabled"`
	NumberLimits    int            `yaml:"number_limits"`
	Detail          string         `yaml:"detail"`
	TransferMethods []string       `yaml:"transfer_methods"`
	Extra           map[string]any `yaml:",inline"`
}

// UnmarshalYAML reads both layouts. A file that only has the `image` block
// is given the general fields too, the way Dify upgrades such files: an
// enabled image upload becomes an upload of the image type.
func (f *FileUpload) UnmarshalYAML(n *yaml.Node) error {
	type plain FileUpload
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	if p.Enabled == nil && p.Image != nil {
		on := p.Image.Enabled
		p.Enabled = &on
		if on {
			if len(p.AllowedFileTypes) == 0 {
				p.AllowedFileTypes = []string{"image"}
			}
			if len(p.AllowedFileUploadMethods) == 0 {
				p.AllowedFileUploadMethods = append([]string(nil), p.Image.TransferMethods...)
			}
			if p.NumberLimits == nil {
				limit := p.Image.NumberLimits
				p.NumberLimits = &limit
			}
		}
	}
	*f = FileUpload(p)
	return nil
}

// DatasetConfigs configures knowledge retrieval for an easy-UI app.
type DatasetConfigs struct {
	// RetrievalModel is "single" or "multiple".
	RetrievalModel        string   `yaml:"retrieval_model"`
	TopK                  *int     `yaml:"top_k"`
	ScoreThreshold        *float64 `yaml:"score_threshold"`
	ScoreThresholdEnabled bool     `yaml:"score_threshold_enabled"`
	// RerankingEnabled is read from `reranking_enable` or `reranking_enabled`.
	RerankingEnabled *bool `yaml:"reranking_enable"`
	// RerankingMode is reranking_model or weighted_score.
	RerankingMode  string `yaml:"reranking_mode"`
	RerankingModel struct {
		ProviderName string         `yaml:"reranking_provider_name"`
		ModelName    string         `yaml:"reranking_model_name"`
		Extra        map[string]any `yaml:",inline"`
	} `yaml:"reranking_model"`
	Weights  map[string]any `yaml:"weights"`
	Datasets struct {
		Strategy string         `yaml:"strategy"`
		Datasets []DatasetRef   `yaml:"datasets"`
		Extra    map[string]any `yaml:",inline"`
	} `yaml:"datasets"`
	MetadataFilteringMode       string         `yaml:"metadata_filtering_mode"`
	MetadataModelConfig         map[string]any `yaml:"metadata_model_config"`
	MetadataFilteringConditions map[string]any `yaml:"metadata_filtering_conditions"`
	Extra                       map[string]any `yaml:",inline"`
}

// UnmarshalYAML reads the reranking switch under either spelling.
func (d *DatasetConfigs) UnmarshalYAML(n *yaml.Node) error {
	type plain DatasetConfigs
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	if v, ok := p.Extra["reranking_enabled"].(bool); ok {
		if p.RerankingEnabled == nil {
			p.RerankingEnabled = &v
		}
		delete(p.Extra, "reranking_enabled")
	}
	*d = DatasetConfigs(p)
	return nil
}

// DatasetRef points at one knowledge base. Files write it as
// {dataset: {enabled, id}}; the flat form {enabled, id} is read as well.
type DatasetRef struct {
	ID      string
	Enabled bool
}

// UnmarshalYAML reads the wrapped and the flat form; a reference that does
// not say otherwise is enabled.
func (r *DatasetRef) UnmarshalYAML(n *yaml.Node) error {
	var wrapped struct {
		Dataset *struct {
			ID      string `yaml:"id"`
			Enabled *bool  `yaml:"enabled"`
		} `yaml:"dataset"`
		ID      string `yaml:"id"`
		Enabled *bool  `yaml:"enabled"`
	}
	if err := n.Decode(&wrapped); err != nil {
		return err
	}
	id, enabled := wrapped.ID, wrapped.Enabled
	if wrapped.Dataset != nil {
		id, enabled = wrapped.Dataset.ID, wrapped.Dataset.Enabled
	}
	*r = DatasetRef{ID: id, Enabled: enabled == nil || *enabled}
	return nil
}

// AgentMode configures the tool-calling loop of an agent-chat app.
type AgentMode struct {
	Enabled bool `yaml:"enabled"`
	// Strategy is function_call or react ("cot" is read as react), or one of
	// the legacy dataset-routing values router and react_router.
	Strategy string `yaml:"strategy"`
	// MaxIteration is 0 when the file leaves it out; see MaxIterations.
	MaxIteration int            `yaml:"max_iteration"`
	Prompt       *AgentPrompt   `yaml:"prompt"`
	Tools        []AgentTool    `yaml:"tools"`
	Extra        map[string]any `yaml:",inline"`
}

// DefaultMaxIterations bounds an agent loop whose file sets no limit.
const DefaultMaxIterations = 10

// MaxIterations returns the iteration limit, or the default when unset.
func (a AgentMode) MaxIterations() int {
	if a.MaxIteration > 0 {
		return a.MaxIteration
	}
	return DefaultMaxIterations
}

// UnmarshalYAML reads "cot", an old name of the ReAct strategy, as react.
func (a *AgentMode) UnmarshalYAML(n *yaml.Node) error {
	type plain AgentMode
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	if p.Strategy == "cot" {
		p.Strategy = "react"
	}
	*a = AgentMode(p)
	return nil
}

// AgentPrompt holds the ReAct prompts.
type AgentPrompt struct {
	FirstPrompt   string         `yaml:"first_prompt"`
	NextIteration string         `yaml:"next_iteration"`
	Extra         map[string]any `yaml:",inline"`
}

// AgentTool is one tool an agent may call. Old files list knowledge bases
// here as {dataset: {...}} items; Dataset is set for those.
type AgentTool struct {
	Enabled bool `yaml:"enabled"`
	// ProviderType is builtin, api, workflow, mcp, plugin, ….
	ProviderType   string         `yaml:"provider_type"`
	ProviderID     string         `yaml:"provider_id"`
	ProviderName   string         `yaml:"provider_name"`
	ToolName       string         `yaml:"tool_name"`
	ToolLabel      string         `yaml:"tool_label"`
	ToolParameters map[string]any `yaml:"tool_parameters"`
	Dataset        *DatasetRef    `yaml:"dataset,omitempty"`
	Extra          map[string]any `yaml:",inline"`
}

// Workflow is the graph of a workflow or advanced-chat app.
type Workflow struct {
	Graph                 Graph          `yaml:"graph"`
	Features              FeatureSet     `yaml:"features"`
	EnvironmentVariables  []Variable     `yaml:"environment_variables"`
	ConversationVariables []Variable     `yaml:"conversation_variables"`
	RAGPipelineVariables  []any          `yaml:"rag_pipeline_variables"`
	Extra                 map[string]any `yaml:",inline"`
}

// Graph is the node-and-edge canvas of a workflow.
type Graph struct {
	Nodes []Node `yaml:"nodes"`
	Edges []Edge `yaml:"edges"`
	// Viewport is canvas state only.
	Viewport map[string]any `yaml:"viewport"`
	Extra    map[string]any `yaml:",inline"`
}

// Node is one node of the graph. Data is the node's configuration exactly as
// the file has it; Kind and NormalizedData give the normalised view.
type Node struct {
	ID string `yaml:"id"`
	// Type is the canvas wrapper type: custom, custom-note,
	// custom-iteration-start, custom-loop-start.
	Type string `yaml:"type"`
	// ParentID is the container (iteration or loop) the node sits in.
	ParentID string         `yaml:"parentId"`
	Data     map[string]any `yaml:"data"`
	Extra    map[string]any `yaml:",inline"`
}

// Edge connects two nodes. SourceHandle picks the branch of the source
// ("source" for the ordinary next step, a case id, "false", "fail-branch", …).
type Edge struct {
	ID           string         `yaml:"id"`
	Source       string         `yaml:"source"`
	Target       string         `yaml:"target"`
	SourceHandle string         `yaml:"sourceHandle"`
	TargetHandle string         `yaml:"targetHandle"`
	Type         string         `yaml:"type"`
	Data         map[string]any `yaml:"data"`
	Extra        map[string]any `yaml:",inline"`
}

// UnmarshalYAML gives an edge without a source handle the ordinary one.
func (e *Edge) UnmarshalYAML(n *yaml.Node) error {
	type plain Edge
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	if p.SourceHandle == "" {
		p.SourceHandle = "source"
	}
	*e = Edge(p)
	return nil
}

// Variable is an environment or conversation variable of a graph app.
type Variable struct {
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
	// ValueType is string, number, secret, object, boolean or array[…].
	ValueType   string         `yaml:"value_type"`
	Value       any            `yaml:"value"`
	Description string         `yaml:"description"`
	Selector    []string       `yaml:"selector"`
	Extra       map[string]any `yaml:",inline"`
}
