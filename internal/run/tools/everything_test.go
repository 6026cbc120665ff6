package tools_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"appkb/internal/llm"
	"appkb/internal/run/agent"
	"appkb/internal/run/tools"
)

// everythingDir holds the npm package of the MCP reference server
// (@modelcontextprotocol/server-everything); its node_modules is not in git.
const everythingDir = "../../../clients/mcp-everything"

// everything starts the MCP reference server over the given transport
// ("streamableHttp" or "sse") on a free port of 127.0.0.1 and gives its base
// URL. It skips the test when node or npm is missing or npm cannot install
// the package.
func everything(t *testing.T, transport string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed, so the MCP reference server cannot run")
	}
	main := filepath.Join(everythingDir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if _, err := os.Stat(main); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Skip("npm is not installed, so the MCP reference server cannot be installed")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = everythingDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("npm ci in %s failed, so the MCP reference server is not tested: %v\n%s", everythingDir, err, out)
		}
	}
	// A port that was free a moment ago; the server takes it from PORT.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, main, transport)
	cmd.Env = append(os.Environ(), "PORT="+port)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	// The server says on stderr when it listens; a failed start ends stderr.
	lines := bufio.NewScanner(stderr)
	var said []string
	for lines.Scan() {
		line := lines.Text()
		said = append(said, line)
		if strings.Contains(line, "port "+port) {
			go func() {
				defer func() { _ = recover() }()
				for lines.Scan() { // keep draining, so the server never blocks on a full pipe
				}
			}()
			return "http://127.0.0.1:" + port
		}
	}
	t.Fatalf("the MCP reference server did not start:\n%s", strings.Join(said, "\n"))
	return ""
}

func TestMCPReferenceServer(t *testing.T) {
	for _, tc := range []struct{ transport, serverMode, path string }{
		{tools.TransportStreamable, "streamableHttp", "/mcp"},
		{tools.TransportSSE, "sse", "/sse"},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			base := everything(t, tc.serverMode)
			dir := t.TempDir()
			cfg, err := tools.LoadConfig(writeFile(t, dir, "tools.yaml", `providers:
  everything: {type: mcp, url: "`+base+tc.path+`", transport: `+tc.transport+`, timeout: 20}
`), nil)
			if err != nil {
				t.Fatal(err)
			}
			r := tools.NewRegistry(cfg, loopback)
			ctx := context.Background()
			env := &tools.Env{Guard: loopback}

			// A direct call through the registry.
			sum, err := r.Find(ctx, tools.Ref{ProviderType: "mcp", Provider: "everything", Name: "get-sum"})
			if err != nil {
				t.Fatal(err)
			}
			args, err := sum.Prepare(map[string]any{"a": 2, "b": 40})
			if err != nil {
				t.Fatal(err)
			}
			out, err := sum.Run(ctx, env, args)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.Text, "42") {
				t.Errorf("get-sum said %q, want the sum 42", out.Text)
			}

			// An agent whose model (the offline one) calls echo.
			echo, err := r.Find(ctx, tools.Ref{ProviderType: "mcp", Provider: "everything", Name: "echo"})
			if err != nil {
				t.Fatal(err)
			}
			model, err := (*llm.Registry)(nil).Chat("", "")
			if err != nil {
				t.Fatal(err)
			}
			var observed []string
			res, err := agent.Run(ctx, agent.Config{
				Model:    model,
				Messages: []llm.Message{{Role: llm.RoleUser, Content: `echo {"message": "hello from appkb"}`}},
				Tools:    agent.NewTools([]*agent.Tool{{Tool: echo}}), MaxIterations: 3, Env: env,
				Hooks: agent.Hooks{CallDone: func(_ *agent.Round, c *agent.Call) error { observed = append(observed, c.Observation); return nil }},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(observed) != 1 || observed[0] != "Echo: hello from appkb" || res.Answer != "Echo: hello from appkb" {
				t.Errorf("observations %q, answer %q; want the echo once", observed, res.Answer)
			}
		})
	}
}
