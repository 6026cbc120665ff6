package llm

import (
	"context"
	"time"

	"appkb/internal/platform/metrics"
)

// The wrappers below report every model call to the metrics package: the
// provider entry's name, the kind of model, the outcome, the duration and
// the tokens the call used.

type observedChat struct {
	ChatModel
	provider string
}

func (m observedChat) Chat(ctx context.Context, req ChatRequest) (*ChatResponse, error) {
	start := time.Now()
	res, err := m.ChatModel.Chat(ctx, req)
	observeChat(m.provider, start, res, err)
	return res, err
}

func (m observedChat) Stream(ctx context.Context, req ChatRequest, onChunk func(Chunk) error) (*ChatResponse, error) {
	start := time.Now()
	res, err := m.ChatModel.Stream(ctx, req, onChunk)
	observeChat(m.provider, start, res, err)
	return res, err
}

func observeChat(provider string, start time.Time, res *ChatResponse, err error) {
	var prompt, completion int
	if res != nil {
		prompt, completion = res.Usage.PromptTokens, res.Usage.CompletionTokens
	}
	metrics.ModelCall(provider, TypeChat, err, time.Since(start), prompt, completion)
}

type observedEmbedder struct {
	Embedder
	provider string
}

func (m observedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, Usage, error) {
	start := time.Now()
	vecs, usage, err := m.Embedder.Embed(ctx, texts)
	metrics.ModelCall(m.provider, TypeEmbedding, err, time.Since(start), usage.PromptTokens, 0)
	return vecs, usage, err
}

type observedReranker struct {
	Reranker
	provider string
}

func (m observedReranker) Rerank(ctx context.Context, query string, docs []string, topN int) ([]RerankResult, error) {
	start := time.Now()
	res, err := m.Reranker.Rerank(ctx, query, docs, topN)
	metrics.ModelCall(m.provider, TypeRerank, err, time.Since(start), 0, 0)
	return res, err
}
