package main

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

type appkb struct {
	cmd              *exec.Cmd
	base, key, kbKey string
	// flowKey is the key of the imported workflow (with -workflow),
	// chatflowKey that of the imported chatflow (with -chatflow).
	flowKey, chatflowKey string
	dir                  string
	keep                 bool
}

// workflowYAML is the workflow -workflow imports and runs.
//
//go:embed workflow.yml
var workflowYAML []byte

// chatflowYAML is the chatflow -chatflow imports and sends messages to.
//
//go:embed chatflow.yml
var chatflowYAML []byte

// startAppkb starts `bin serve --demo` on a free port with a fresh data
// directory (and databaseURL, when given, as its database) and a providers file that maps the demo apps' provider
// ("appkb") to the upstream, and waits until it answers. With flow, it
// first imports workflow.yml there, with chatflow chatflow.yml.
func startAppkb(bin, upstreamBase, databaseURL string, keep, flow, chatflow bool) (*appkb, error) {
	dir, err := os.MkdirTemp("", "appkb-load-")
	if err != nil {
		return nil, err
	}
	providers := filepath.Join(dir, "providers.yaml")
	conf := fmt.Sprintf("providers:\n  - name: appkb\n    backend: openai-compatible\n    base_url: %s\n    timeout: 60s\n    max_retries: 0\n    defaults: {chat: fake}\n", upstreamBase)
	if err := os.WriteFile(providers, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()

	data := []string{"--data-dir", filepath.Join(dir, "data")}
	if databaseURL != "" {
		data = append(data, "--database-url", databaseURL)
	}
	flowKey, chatflowKey := "", ""
	if flow {
		if flowKey, err = importApp(bin, dir, data, "workflow.yml", workflowYAML); err != nil {
			return nil, err
		}
	}
	if chatflow {
		if chatflowKey, err = importApp(bin, dir, data, "chatflow.yml", chatflowYAML); err != nil {
			return nil, err
		}
	}
	args := append([]string{"serve", "--demo", "--addr", addr, "--providers", providers}, data...)
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "appkb.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &appkb{cmd: cmd, base: "http://" + addr + "/v1", dir: dir, keep: keep, flowKey: flowKey, chatflowKey: chatflowKey}
	keyc := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var keys [2]string
		sent := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 4 && f[0] == "chat" && f[1] == "app" && f[2] == "key":
				keys[0] = f[3]
			case len(f) == 3 && f[0] == "knowledge" && f[1] == "key":
				keys[1] = f[2]
			}
			if !sent && keys[0] != "" && keys[1] != "" {
				keyc <- keys
				sent = true
			}
		}
		if !sent {
			close(keyc)
		}
	}()
	select {
	case k, ok := <-keyc:
		if !ok {
			a.stop()
			return nil, errors.New("appkb printed no chat app and knowledge keys (see " + logFile.Name() + ")")
		}
		a.key, a.kbKey = k[0], k[1]
	case <-time.After(2 * time.Minute):
		a.stop()
		return nil, errors.New("appkb did not start")
	}
	for i := 0; ; i++ {
		res, err := http.Get(a.base + "/info")
		if err == nil {
			res.Body.Close()
			break
		}
		if i > 600 {
			a.stop()
			return nil, fmt.Errorf("appkb does not answer: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return a, nil
}

// importApp writes def to name in dir and imports it with `appkb app
// import` into the data directory (or database) the server will use, and
// returns the new app's key.
func importApp(bin, dir string, data []string, name string, def []byte) (string, error) {
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, def, 0o644); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return "", err
	}
	out, err := exec.Command(bin, append(append([]string{"app", "import"}, data...), file)...).Output()
	if err != nil {
		return "", fmt.Errorf("import %s: %w", name, err)
	}
	var res struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.APIKey == "" {
		return "", fmt.Errorf("import %s: unexpected answer %q", name, out)
	}
	return res.APIKey, nil
}

func (a *appkb) stop() {
	if a.cmd.Process != nil {
		a.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { a.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			a.cmd.Process.Kill()
			<-done
		}
	}
	if a.keep {
		fmt.Println("data kept in", a.dir)
	} else {
		os.RemoveAll(a.dir)
	}
}
