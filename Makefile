# appkb — see README.md. cgo is required (SQLite); the sqlite_fts5 tag builds
# SQLite with full-text search.
GO      ?= go
TAGS    := sqlite_fts5
BIN     := bin/appkb
export CGO_ENABLED := 1

.PHONY: all build run test bench generate check-generated lint fmt clean

all: build

build:
	$(GO) build -tags $(TAGS) -o $(BIN) .

## run: start the server on 127.0.0.1:5001 with a demo app, printing its keys
run: build
	./$(BIN) serve --demo

## test: every test, with the race detector
test:
	$(GO) test -tags $(TAGS) -race -count=1 ./...

## bench: appkb against a fake model server, next to that server alone (bench/README.md)
BENCH_FLAGS ?= -c 16 -d 10s
bench: build
	$(GO) run ./bench/load -appkb $(BIN) $(BENCH_FLAGS)

## generate: regenerate gen/ from openapi.yaml
generate:
	$(GO) tool oapi-codegen -config oapi-config.yaml openapi.yaml

## check-generated: fail when gen/ is not what `make generate` produces
check-generated: generate
	@git diff --exit-code -- gen/ || { echo "gen/ is stale: run 'make generate' and commit the result"; exit 1; }
	@test -z "$$(git status --porcelain -- gen/)" || { git status --porcelain -- gen/; echo "gen/ has untracked changes"; exit 1; }

lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet -tags $(TAGS) ./...

fmt:
	gofmt -w .

clean:
	rm -rf bin
