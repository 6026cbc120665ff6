// Package textsplit cleans document text and cuts it into chunks the way a
// knowledge base's process_rule asks, and extracts keywords for economy
// indexing. It is pure: no database, no network. Token counts are cl100k
// counts from llm.CountTokens.
//
// # Modes
//
//   - automatic: the rule's own rules are ignored and AutomaticRules apply:
//     extra spaces removed, URLs and e-mail addresses kept, chunks of at most
//     500 tokens overlapping by up to 50. The text is not cut at a fixed
//     separator; chunks are filled with whole paragraphs where they fit, else
//     whole lines, sentences, clauses, words, and as a last resort characters
//     (see Splitter).
//   - custom: the rule's pre_processing_rules and segmentation apply. The
//     separator is a hard boundary: the text is first cut at every
//     occurrence of it, the separator itself is dropped, and no chunk spans
//     two pieces. A piece within max_tokens is one chunk, however short; a
//     longer piece is cut into chunks as in automatic mode, with the
//     configured max_tokens and chunk_overlap.
//   - hierarchical: parent chunks carry child chunks. With parent_mode
//     "paragraph" (the default) parents are made from the text by
//     segmentation, as in custom mode; with "full-doc" the whole cleaned text
//     is the one parent, whatever its length. Each parent's content is then
//     cut into children by subchunk_segmentation, as in custom mode.
//     Children never span two parents.
//
// # Defaults
//
// A field that is absent, null, "" or 0 takes its default: separator "\n"
// and chunk_overlap 0 in custom mode (the contract's defaults) and max_tokens
// 500; in hierarchical mode the parent separator is "\n\n" with max_tokens
// 500, the child separator "\n" with max_tokens 200, both without overlap.
// A separator may be written with escapes: `\n`, `\t`, `\r` and `\\` (as a
// JSON string "\\n\\n") mean a newline, a tab, a carriage return and a
// backslash.
//
// # Limits
//
// max_tokens must be between MinMaxTokens and MaxMaxTokens, chunk_overlap at
// least 0 and smaller than max_tokens, mode one of the three modes and
// parent_mode "paragraph" or "full-doc"; otherwise Resolve returns a
// *RuleError (the API answers 400 invalid_param).
//
// # Cleaning
//
// See Config.Clean.
package textsplit

import (
	"fmt"
	"strings"
)

// The process_rule modes.
const (
	ModeAutomatic    = "automatic"
	ModeCustom       = "custom"
	ModeHierarchical = "hierarchical"
)

// The parent modes of hierarchical splitting.
const (
	ParentParagraph = "paragraph"
	ParentFullDoc   = "full-doc"
)

// The pre-processing rule ids. RemoveStopwords is accepted and does nothing,
// as in Dify.
const (
	RemoveExtraSpaces = "remove_extra_spaces"
	RemoveURLsEmails  = "remove_urls_emails"
	RemoveStopwords   = "remove_stopwords"
)

// Bounds and defaults of segmentation.
const (
	MinMaxTokens = 50
	MaxMaxTokens = 4000

	DefaultMaxTokens      = 500 // automatic, custom and hierarchical parents
	DefaultOverlap        = 50  // automatic only
	DefaultChildMaxTokens = 200
	DefaultSeparator      = "\n"   // custom, and hierarchical children
	DefaultParentSep      = "\n\n" // hierarchical parents
)

// ProcessRule is the process_rule object of the API.
type ProcessRule struct {
	Mode  string `json:"mode"`
	Rules *Rules `json:"rules,omitempty"`
}

// Rules is process_rule.rules.
type Rules struct {
	PreProcessingRules   []PreProcessingRule `json:"pre_processing_rules,omitempty"`
	Segmentation         *Segmentation       `json:"segmentation,omitempty"`
	ParentMode           string              `json:"parent_mode,omitempty"`
	SubchunkSegmentation *Segmentation       `json:"subchunk_segmentation,omitempty"`
}

// PreProcessingRule switches one cleaning step on or off.
type PreProcessingRule struct {
	ID      string `json:"id"`
	Enabled bool   `json:"enabled"`
}

// Segmentation says where chunks are cut and how large they may be.
type Segmentation struct {
	Separator    string `json:"separator"`
	MaxTokens    int    `json:"max_tokens"`
	ChunkOverlap int    `json:"chunk_overlap"`
}

// AutomaticRules returns the rules automatic mode applies, as the API shows
// them: remove_extra_spaces on, remove_urls_emails off, max_tokens 500,
// chunk_overlap 50. Its separator "\n" is informative only: automatic mode
// prefers paragraph breaks, then line breaks, and so on (see Splitter).
func AutomaticRules() Rules {
	return Rules{
		PreProcessingRules: []PreProcessingRule{
			{ID: RemoveExtraSpaces, Enabled: true},
			{ID: RemoveURLsEmails, Enabled: false},
		},
		Segmentation: &Segmentation{Separator: DefaultSeparator, MaxTokens: DefaultMaxTokens, ChunkOverlap: DefaultOverlap},
	}
}

// RuleError reports an invalid process_rule field.
type RuleError struct {
	Field   string // the JSON path, e.g. "process_rule.rules.segmentation.max_tokens"
	Message string
}

func (e *RuleError) Error() string { return e.Field + ": " + e.Message }

// Config is a resolved process rule: every default filled in, separators
// unescaped.
type Config struct {
	Mode       string
	ParentMode string // hierarchical only

	RemoveExtraSpaces bool
	RemoveURLsEmails  bool

	// Segment makes the chunks (automatic, custom) or the parents
	// (hierarchical with parent mode paragraph).
	Segment Splitter
	// Child makes the children of each parent (hierarchical only).
	Child Splitter
}

// Resolve checks the rule and fills in defaults.
func (r ProcessRule) Resolve() (Config, error) {
	switch r.Mode {
	case ModeAutomatic:
		return Config{
			Mode:              ModeAutomatic,
			RemoveExtraSpaces: true,
			Segment:           Splitter{MaxTokens: DefaultMaxTokens, Overlap: DefaultOverlap},
		}, nil
	case ModeCustom, ModeHierarchical:
	case "":
		return Config{}, &RuleError{"process_rule.mode", "is required"}
	default:
		return Config{}, &RuleError{"process_rule.mode", fmt.Sprintf("must be %s, %s or %s, not %q", ModeAutomatic, ModeCustom, ModeHierarchical, r.Mode)}
	}
	rules := Rules{}
	if r.Rules != nil {
		rules = *r.Rules
	}
	c := Config{Mode: r.Mode}
	for _, p := range rules.PreProcessingRules {
		switch p.ID {
		case RemoveExtraSpaces:
			c.RemoveExtraSpaces = p.Enabled
		case RemoveURLsEmails:
			c.RemoveURLsEmails = p.Enabled
		}
	}
	var err error
	if r.Mode == ModeCustom {
		c.Segment, err = resolveSegmentation(rules.Segmentation, "process_rule.rules.segmentation", DefaultSeparator, DefaultMaxTokens)
		return c, err
	}
	switch rules.ParentMode {
	case "", ParentParagraph:
		c.ParentMode = ParentParagraph
	case ParentFullDoc:
		c.ParentMode = ParentFullDoc
	default:
		return Config{}, &RuleError{"process_rule.rules.parent_mode", fmt.Sprintf("must be %s or %s, not %q", ParentParagraph, ParentFullDoc, rules.ParentMode)}
	}
	if c.Segment, err = resolveSegmentation(rules.Segmentation, "process_rule.rules.segmentation", DefaultParentSep, DefaultMaxTokens); err != nil {
		return Config{}, err
	}
	if c.Child, err = resolveSegmentation(rules.SubchunkSegmentation, "process_rule.rules.subchunk_segmentation", DefaultSeparator, DefaultChildMaxTokens); err != nil {
		return Config{}, err
	}
	return c, nil
}

func resolveSegmentation(s *Segmentation, field, defSep string, defMax int) (Splitter, error) {
	sp := Splitter{Separator: defSep, MaxTokens: defMax}
	if s == nil {
		return sp, nil
	}
	if s.Separator != "" {
		sp.Separator = UnescapeSeparator(s.Separator)
	}
	switch {
	case s.MaxTokens == 0:
	case s.MaxTokens < MinMaxTokens || s.MaxTokens > MaxMaxTokens:
		return Splitter{}, &RuleError{field + ".max_tokens", fmt.Sprintf("must be between %d and %d", MinMaxTokens, MaxMaxTokens)}
	default:
		sp.MaxTokens = s.MaxTokens
	}
	switch {
	case s.ChunkOverlap < 0:
		return Splitter{}, &RuleError{field + ".chunk_overlap", "must not be negative"}
	case s.ChunkOverlap >= sp.MaxTokens:
		return Splitter{}, &RuleError{field + ".chunk_overlap", fmt.Sprintf("must be smaller than max_tokens (%d)", sp.MaxTokens)}
	}
	sp.Overlap = s.ChunkOverlap
	return sp, nil
}

// UnescapeSeparator turns the escapes \n, \t, \r and \\ into the characters
// they name; any other backslash is kept as it is.
func UnescapeSeparator(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case 't':
				b.WriteByte('\t')
				i++
				continue
			case 'r':
				b.WriteByte('\r')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Rule returns the resolved rule in the API's shape, with the separators as
// characters (not escapes). For automatic mode it is AutomaticRules.
func (c Config) Rule() ProcessRule {
	if c.Mode == ModeAutomatic {
		rules := AutomaticRules()
		return ProcessRule{Mode: ModeAutomatic, Rules: &rules}
	}
	rules := &Rules{
		PreProcessingRules: []PreProcessingRule{
			{ID: RemoveExtraSpaces, Enabled: c.RemoveExtraSpaces},
			{ID: RemoveURLsEmails, Enabled: c.RemoveURLsEmails},
		},
		Segmentation: &Segmentation{Separator: c.Segment.Separator, MaxTokens: c.Segment.MaxTokens, ChunkOverlap: c.Segment.Overlap},
	}
	if c.Mode == ModeHierarchical {
		rules.ParentMode = c.ParentMode
		rules.SubchunkSegmentation = &Segmentation{Separator: c.Child.Separator, MaxTokens: c.Child.MaxTokens, ChunkOverlap: c.Child.Overlap}
	}
	return ProcessRule{Mode: c.Mode, Rules: rules}
}

// Process cleans text and splits it as the rule says: Resolve, Clean, Split.
func Process(text string, r ProcessRule) ([]Chunk, error) {
	c, err := r.Resolve()
	if err != nil {
		return nil, err
	}
	return c.Split(c.Clean(text)), nil
}
