// Package llm is appkb's model provider layer. Domain packages ask a
// Registry for a model by the provider and model names an app definition
// uses, and get one small interface per model type: ChatModel (blocking and
// streaming, with tool calls), Embedder, Reranker, Transcriber (speech to
// text), Speaker (text to speech) and Moderator. Every failure is an
// *apperr.Error with status 400 and one of the codes
// provider_not_initialize, provider_quota_exceeded,
// model_currently_not_support or completion_request_error.
//
// # Backends
//
// "openai-compatible" talks to any server that speaks OpenAI's HTTP API
// (OpenAI itself, Ollama, vLLM, DeepSeek, SiliconFlow, LocalAI, ...) through
// the official openai-go SDK, which also does the per-attempt timeout and
// the retries with exponential backoff (or the server's Retry-After) on 408,
// 409, 429 and 5xx answers and on connection errors; an attempt that runs
// out of time is not retried. Upstream failures map to codes as follows:
// 401 and 403, a missing key or an unreachable server give
// provider_not_initialize;
// a 429 that outlasts the retries gives provider_quota_exceeded; 404 gives
// model_currently_not_support; anything else gives completion_request_error
// with the upstream status and a cleaned, shortened upstream message.
//
// "builtin" runs in-process with no model server and no network, and gives
// the same output for the same input:
//
//   - Chat answers from ChatRequest.Knowledge: it quotes up to three of its
//     sentences that share the most words with the last user message (rare
//     words count more), in their original order, or replies "I could not
//     find an answer to that in the knowledge I was given." when no
//     sentence shares a word. Without knowledge it replies "I am appkb's
//     built-in offline model: I can only quote the knowledge I am given, and
//     this time there is none." followed by ` You said: "<last user
//     message>"`. See BuiltinAnswer. When ChatRequest.Tools is set and the
//     last user message names a tool, it calls that tool instead, and once
//     the turn has observations it answers with them (see builtinToolTurn).
//     Streaming sends one word (with the white
//     space after it) per chunk; the chunks add up to the blocking answer.
//     Prompt tokens are CountMessages of the messages, completion tokens
//     CountTokens of the answer.
//   - Embeddings are hashed character trigrams, words and word stems, 256
//     dimensions, unit length. Model BuiltinEmbeddingModel ("builtin-2",
//     the default of new knowledge bases) is BuiltinEmbedding2; any other
//     name, "builtin" among them, is BuiltinEmbedding, which stays as it
//     was for the vectors already stored with it.
//   - Rerank gives each document 0.7 times its share of the query's word
//     stems, weighted by how rare each is among the documents, plus 0.3
//     times the cosine similarity of their BuiltinEmbedding2 vectors (when
//     positive).
//   - Moderation flags texts containing one of the entry's keywords, and
//     nothing when there are none.
//   - Speech runs offline with Debian's programs found on PATH (speech.go):
//     espeak-ng and ffmpeg (or lame) give MP3 speech; ffmpeg and
//     pocketsphinx with its US English model transcribe recordings. A
//     missing program fails with model_currently_not_support naming its
//     package.
//
// Token counts of both backends (whenever a server reports none) come from
// CountTokens and CountMessages, which use the cl100k_base vocabulary shipped
// inside the binary.
//
// # Configuration
//
// Load reads an optional YAML file and two environment variables. A file
// looks like this (only name is always required):
//
//	providers:
//	  - name: openai                 # the provider name app definitions use
//	    aliases: [openai_official]   # more names for the same entry
//	    backend: openai-compatible   # or builtin (default: openai-compatible)
//	    base_url: https://api.openai.com/v1  # required, except for "openai"
//	    api_key_env: OPENAI_API_KEY  # or api_key: sk-...; never both
//	    headers: {X-Team: search}    # extra HTTP headers
//	    timeout: 60s                 # per attempt, streaming included (default 60s)
//	    max_retries: 2               # 0-10 (default 2)
//	    defaults:                    # model used when the app names none
//	      chat: gpt-4o-mini
//	      embedding: text-embedding-3-small
//	      rerank: ""
//	      speech_to_text: whisper-1
//	      text_to_speech: tts-1
//	      moderation: omni-moderation-latest
//	    voice: alloy                 # default text-to-speech voice
//	    extra_params: [top_k]        # completion params forwarded besides the standard ones
//	    price_unit: 1M               # prices below are per 1M tokens (or 1K; default 1M)
//	    currency: USD                # default USD
//	    models:                      # keyed by the model name apps use
//	      gpt-4o-mini: {input: 0.15, output: 0.60}
//	      gpt-4: {model: gpt-4o}     # alias: apps say gpt-4, the server gets gpt-4o
//	      gpt-4o: {input: 2.50, output: 10.00}
//	  - name: ollama
//	    base_url: http://127.0.0.1:11434/v1
//	    defaults: {chat: llama3.2, embedding: nomic-embed-text}
//	  - name: local
//	    backend: builtin
//	    keywords: [forbidden phrase] # builtin moderation flags these
//
// Provider names are matched case-insensitively, and Dify's plugin form
// "org/plugin/provider" is reduced to its last segment, so
// "langgenius/openai/openai" finds the "openai" entry (NormalizeProvider).
// Model names not listed under models are sent as they are. An alias
// without prices uses the prices of its target. Prices are copied exactly as
// written; Usage reports them and the computed costs (rounded to 7 decimal
// places) only for models that have prices. Unknown keys are errors.
//
// When OPENAI_BASE_URL or OPENAI_API_KEY is set and no entry is named
// "openai", an "openai" entry is made from them (base URL defaulting to
// OpenAI's). The names "appkb" and "builtin" always mean the builtin backend
// unless an entry takes them. Any other unconfigured name falls back to the
// builtin backend, or, when Load is strict, fails with
// provider_not_initialize.
//
// Completion parameters forwarded to openai-compatible servers are
// temperature, top_p, max_tokens, max_completion_tokens, stop,
// presence_penalty, frequency_penalty, seed, response_format (Dify's string
// form is turned into an object, with json_schema attached),
// reasoning_effort, logit_bias, user, tool_choice and parallel_tool_calls,
// plus the entry's extra_params; others are dropped.
package llm
