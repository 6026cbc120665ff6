package llm

import (
	"appkb/internal/platform/apperr"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// standardParams are the completion parameters forwarded to every
// openai-compatible server; a provider entry may add more in extra_params.
var standardParams = map[string]bool{
	"temperature": true, "top_p": true, "max_tokens": true, "max_completion_tokens": true,
	"stop": true, "presence_penalty": true, "frequency_penalty": true, "seed": true,
	"response_format": true, "reasoning_effort": true, "logit_bias": true, "user": true,
	"tool_choice": true, "parallel_tool_calls": true,
}

// reservedParams are request fields this package sets itself; app
// parameters never override them.
var reservedParams = map[string]bool{
	"model": true, "messages": true, "stream": true, "stream_options": true,
	"tools": true, "functions": true, "function_call": true, "n": true, "json_schema": true,
}

// remoteClient talks to one openai-compatible server.
type remoteClient struct {
	name   string
	apiKey string
	client openai.Client
}

func newRemoteClient(s *settings) *remoteClient {
	opts := []option.RequestOption{
		option.WithBaseURL(s.baseURL),
		// The SDK reads OPENAI_* variables from the process environment; the
		// options below replace what it found, so that one provider's
		// credentials never reach another provider's server.
		option.WithAPIKey(s.apiKey),
		option.WithAdminAPIKey(""),
		option.WithHeaderDel("OpenAI-Organization"),
		option.WithHeaderDel("OpenAI-Project"),
		option.WithMaxRetries(s.maxRetries),
		option.WithRequestTimeout(s.timeout),
		option.WithMiddleware(logAttempts(s.name)),
		option.WithHTTPClient(&http.Client{Transport: upstreamTransport()}),
	}
	keys := make([]string, 0, len(s.headers))
	for k := range s.headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts = append(opts, option.WithHeader(k, s.headers[k]))
	}
	return &remoteClient{name: s.name, apiKey: s.apiKey, client: openai.NewClient(opts...)}
}

// upstreamTransport keeps enough idle connections to a model server for
// many concurrent calls. Go's default keeps two per host, so under load
// most calls would dial (and later close) a fresh connection.
func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// logAttempts logs every HTTP attempt (retries included) without bodies or
// headers.
func logAttempts(provider string) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		start := time.Now()
		res, err := next(req)
		ctx := req.Context()
		ok := err == nil && res.StatusCode < 400
		if ok && !slog.Default().Enabled(ctx, slog.LevelDebug) {
			return res, err // the common case: nothing to log
		}
		attrs := []any{"provider", provider, "host", req.URL.Host, "path", req.URL.Path,
			"attempt", req.Header.Get("X-Stainless-Retry-Count"), "elapsed", time.Since(start)}
		switch {
		case err != nil:
			slog.WarnContext(ctx, "llm: request to provider failed", append(attrs, "err", err)...)
		case res.StatusCode >= 400:
			slog.WarnContext(ctx, "llm: provider answered with an error", append(attrs, "status", res.StatusCode)...)
		default:
			slog.DebugContext(ctx, "llm: request done", append(attrs, "status", res.StatusCode)...)
		}
		return res, err
	}
}

// chatPath is the chat completions endpoint under a server's base URL.
const chatPath = "chat/completions"

// remoteChat is a chat model behind an openai-compatible server.
type remoteChat struct {
	p     *provider
	model string
	price *pricing
}

// request builds the request body. It returns the real model name and its
// prices too, as req.Model may pick another model than the bound one.
func (m *remoteChat) request(req ChatRequest, stream bool) ([]byte, string, *pricing, error) {
	model, price := m.model, m.price
	if req.Model != "" {
		var err error
		if model, price, err = m.p.resolve(TypeChat, req.Model); err != nil {
			return nil, "", nil, err
		}
	}
	msgs, err := wireMessages(req.Messages)
	if err != nil {
		return nil, "", nil, err
	}
	body := chatBody{Model: model, Messages: msgs, Tools: wireTools(req.Tools)}
	if stream {
		body.Stream, body.StreamOptions = true, &streamOpts{IncludeUsage: true}
	}
	extra, err := m.forwardedParams(req.Params)
	if err != nil {
		return nil, "", nil, err
	}
	raw, err := encodeChatBody(body, extra)
	if err != nil {
		return nil, "", nil, err
	}
	return raw, model, price, nil
}

// forwardedParams selects the completion parameters the server gets.
func (m *remoteChat) forwardedParams(in map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for k, v := range in {
		if v == nil || reservedParams[k] || !(standardParams[k] || m.p.extraParams[k]) {
			continue
		}
		out[k] = v
	}
	// Dify stores response_format as a bare string and the schema of
	// "json_schema" in a parameter of its own; the API wants objects.
	if f, ok := out["response_format"].(string); ok {
		switch f {
		case "":
			delete(out, "response_format")
		case "json_schema":
			rf := map[string]any{"type": f}
			switch s := in["json_schema"].(type) {
			case string:
				var schema any
				if err := json.Unmarshal([]byte(s), &schema); err != nil {
					return nil, modelError(apperr.CodeCompletionRequestError, err, "The json_schema completion parameter is not valid JSON.")
				}
				rf["json_schema"] = schema
			case map[string]any:
				rf["json_schema"] = s
			}
			out["response_format"] = rf
		default:
			out["response_format"] = map[string]any{"type": f}
		}
	}
	return out, nil
}

func (m *remoteChat) Chat(ctx context.Context, req ChatRequest) (*ChatResponse, error) {
	start := time.Now()
	body, model, price, err := m.request(req, false)
	if err != nil {
		return nil, err
	}
	var raw *http.Response
	if err := m.p.remote.client.Post(ctx, chatPath, body, &raw); err != nil {
		return nil, m.p.remote.fail(ctx, raw, err, model)
	}
	var res chatAnswer
	err = json.NewDecoder(raw.Body).Decode(&res)
	raw.Body.Close()
	if err != nil {
		return nil, m.p.remote.fail(ctx, nil, fmt.Errorf("decode answer: %w", err), model)
	}
	if len(res.Choices) == 0 {
		return nil, modelError(apperr.CodeCompletionRequestError, nil, "Model provider %q returned no answer.", m.p.name)
	}
	choice := res.Choices[0]
	out := &ChatResponse{Model: model, Content: choice.Message.Content, FinishReason: choice.FinishReason}
	for _, tc := range choice.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	var prompt, completion int
	if u := res.Usage; u != nil && u.TotalTokens > 0 {
		prompt, completion = u.PromptTokens, u.CompletionTokens
	} else {
		prompt, completion = countLocally(req, out)
	}
	out.Usage = makeUsage(price, prompt, completion, time.Since(start))
	return out, nil
}

// countLocally counts tokens for servers that report no usage.
func countLocally(req ChatRequest, res *ChatResponse) (prompt, completion int) {
	completion = CountTokens(res.Content)
	for _, tc := range res.ToolCalls {
		completion += CountTokens(tc.Name) + CountTokens(tc.Arguments)
	}
	return CountMessages(req.Messages), completion
}

func (m *remoteChat) Stream(ctx context.Context, req ChatRequest, onChunk func(Chunk) error) (*ChatResponse, error) {
	start := time.Now()
	onChunk = orDiscard(onChunk)
	body, model, price, err := m.request(req, true)
	if err != nil {
		return nil, err
	}
	var raw *http.Response
	err = m.p.remote.client.Post(ctx, chatPath, body, &raw)
	stream := ssestream.NewStream[chatChunk](ssestream.NewDecoder(raw), err)
	defer stream.Close()

	type partialCall struct {
		id, name string
		args     strings.Builder
	}
	var (
		content    strings.Builder
		calls      = map[int64]*partialCall{}
		finish     string
		usage      answerUsage
		usageFound bool
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Usage != nil && chunk.Usage.TotalTokens > 0 {
			usage, usageFound = *chunk.Usage, true
		}
		for _, choice := range chunk.Choices {
			if choice.Index != 0 {
				continue
			}
			if choice.FinishReason != "" {
				finish = choice.FinishReason
			}
			for _, d := range choice.Delta.ToolCalls {
				pc := calls[d.Index]
				if pc == nil {
					pc = &partialCall{}
					calls[d.Index] = pc
				}
				if d.ID != "" {
					pc.id = d.ID
				}
				pc.name += d.Function.Name
				pc.args.WriteString(d.Function.Arguments)
			}
			if text := choice.Delta.Content; text != "" {
				content.WriteString(text)
				if err := onChunk(Chunk{Delta: text}); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, m.p.remote.fail(ctx, raw, err, model)
	}
	out := &ChatResponse{Model: model, Content: content.String(), FinishReason: finish}
	indexes := make([]int64, 0, len(calls))
	for i := range calls {
		indexes = append(indexes, i)
	}
	sort.Slice(indexes, func(a, b int) bool { return indexes[a] < indexes[b] })
	for _, i := range indexes {
		pc := calls[i]
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: pc.id, Name: pc.name, Arguments: pc.args.String()})
	}
	if len(out.ToolCalls) > 0 {
		if err := onChunk(Chunk{ToolCalls: out.ToolCalls}); err != nil {
			return nil, err
		}
	}
	prompt, completion := int(usage.PromptTokens), int(usage.CompletionTokens)
	if !usageFound {
		prompt, completion = countLocally(req, out)
	}
	out.Usage = makeUsage(price, prompt, completion, time.Since(start))
	return out, nil
}

// embedBatch bounds the number of texts sent in one embeddings request.
const embedBatch = 256

// remoteEmbedder is an embedding model behind an openai-compatible server.
type remoteEmbedder struct {
	p     *provider
	model string
	price *pricing
}

func (m *remoteEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, Usage, error) {
	start := time.Now()
	out := make([][]float32, len(texts))
	tokens := 0
	for lo := 0; lo < len(texts); lo += embedBatch {
		batch := texts[lo:min(lo+embedBatch, len(texts))]
		var raw *http.Response
		res, err := m.p.remote.client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model:          m.model,
			Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: batch},
			EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
		}, option.WithResponseInto(&raw))
		if err != nil {
			return nil, Usage{}, m.p.remote.fail(ctx, raw, err, m.model)
		}
		if len(res.Data) != len(batch) {
			return nil, Usage{}, modelError(apperr.CodeCompletionRequestError, nil,
				"Model provider %q returned %d embeddings for %d texts.", m.p.name, len(res.Data), len(batch))
		}
		for i, d := range res.Data {
			idx := int(d.Index)
			if !d.JSON.Index.Valid() {
				idx = i
			}
			if idx < 0 || idx >= len(batch) || out[lo+idx] != nil {
				return nil, Usage{}, modelError(apperr.CodeCompletionRequestError, nil, "Model provider %q returned embeddings out of order.", m.p.name)
			}
			vec := make([]float32, len(d.Embedding))
			for j, v := range d.Embedding {
				vec[j] = float32(v)
			}
			out[lo+idx] = vec
		}
		if res.JSON.Usage.Valid() && res.Usage.PromptTokens > 0 {
			tokens += int(res.Usage.PromptTokens)
		} else {
			for _, t := range batch {
				tokens += CountTokens(t)
			}
		}
	}
	return out, makeUsage(m.price, tokens, 0, time.Since(start)), nil
}

// remoteReranker calls POST {base_url}/rerank, the request shape Jina and
// Cohere introduced: {model, query, documents, top_n} answered by
// {results: [{index, relevance_score}]}.
type remoteReranker struct {
	p     *provider
	model string
}

func (m *remoteReranker) Rerank(ctx context.Context, query string, docs []string, topN int) ([]RerankResult, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	body := map[string]any{"model": m.model, "query": query, "documents": docs}
	if topN > 0 {
		body["top_n"] = topN
	}
	var res struct {
		Results []struct {
			Index          int     `json:"index"`
			RelevanceScore float64 `json:"relevance_score"`
		} `json:"results"`
	}
	var raw *http.Response
	if err := m.p.remote.client.Post(ctx, "rerank", body, &res, option.WithResponseInto(&raw)); err != nil {
		return nil, m.p.remote.fail(ctx, raw, err, m.model)
	}
	out := make([]RerankResult, 0, len(res.Results))
	for _, r := range res.Results {
		if r.Index < 0 || r.Index >= len(docs) {
			return nil, modelError(apperr.CodeCompletionRequestError, nil, "Model provider %q returned a rerank result for a document it was not given.", m.p.name)
		}
		out = append(out, RerankResult{Index: r.Index, Score: r.RelevanceScore})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	if topN > 0 && topN < len(out) {
		out = out[:topN]
	}
	return out, nil
}

// remoteTranscriber calls POST {base_url}/audio/transcriptions.
type remoteTranscriber struct {
	p     *provider
	model string
}

func (m *remoteTranscriber) Transcribe(ctx context.Context, audio io.Reader, filename string) (string, error) {
	var raw *http.Response
	res, err := m.p.remote.client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
		Model: m.model,
		File:  openai.File(audio, filename, audioType(filename)),
	}, option.WithResponseInto(&raw))
	if err != nil {
		return "", m.p.remote.fail(ctx, raw, err, m.model)
	}
	return res.Text, nil
}

// audioType guesses the media type of an audio file from its name.
func audioType(filename string) string {
	if t := mime.TypeByExtension(path.Ext(filename)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// remoteSpeaker calls POST {base_url}/audio/speech for MP3 audio.
type remoteSpeaker struct {
	p     *provider
	model string
}

func (m *remoteSpeaker) Speak(ctx context.Context, text, voice string) (*Speech, error) {
	if voice == "" {
		voice = m.p.voice
	}
	if voice == "" {
		voice = "alloy"
	}
	var raw *http.Response
	res, err := m.p.remote.client.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{
		Model:          m.model,
		Input:          text,
		Voice:          openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String(voice)},
		ResponseFormat: openai.AudioSpeechNewParamsResponseFormatMP3,
	}, option.WithResponseInto(&raw))
	if err != nil {
		return nil, m.p.remote.fail(ctx, raw, err, m.model)
	}
	ct := res.Header.Get("Content-Type")
	if ct == "" || ct == "application/octet-stream" {
		ct = "audio/mpeg"
	}
	return &Speech{ContentType: ct, Audio: res.Body}, nil
}

// remoteModerator calls POST {base_url}/moderations.
type remoteModerator struct {
	p     *provider
	model string
}

func (m *remoteModerator) Moderate(ctx context.Context, text string) (*ModerationResult, error) {
	var raw *http.Response
	res, err := m.p.remote.client.Moderations.New(ctx, openai.ModerationNewParams{
		Model: m.model,
		Input: openai.ModerationNewParamsInputUnion{OfString: openai.String(text)},
	}, option.WithResponseInto(&raw))
	if err != nil {
		return nil, m.p.remote.fail(ctx, raw, err, m.model)
	}
	out := &ModerationResult{}
	for _, r := range res.Results {
		out.Flagged = out.Flagged || r.Flagged
		var cats map[string]bool
		if json.Unmarshal([]byte(r.Categories.RawJSON()), &cats) == nil {
			for c, hit := range cats {
				if hit && !contains(out.Categories, c) {
					out.Categories = append(out.Categories, c)
				}
			}
		}
	}
	sort.Strings(out.Categories)
	return out, nil
}
