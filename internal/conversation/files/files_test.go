package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"appkb/db"
	"appkb/internal/apps"
	"appkb/internal/conversation/endusers"
	"appkb/internal/platform/apperr"
)

// testApp is a chat app whose file upload takes images and documents, and
// custom files ending in .pdf or .dat, at most three per message.
const testApp = `version: 0.3.0
kind: app
app: {name: files test, mode: chat}
model_config:
  model: {provider: appkb, name: builtin, mode: chat}
  file_upload:
    enabled: true
    allowed_file_types: [image, document, custom]
    allowed_file_extensions: [.DAT]
    allowed_file_upload_methods: [local_file, remote_url]
    number_limits: 3
`

// noUploadApp takes no files at all.
const noUploadApp = `version: 0.3.0
kind: app
app: {name: no uploads, mode: chat}
model_config:
  model: {provider: appkb, name: builtin, mode: chat}
`

func TestKindOf(t *testing.T) {
	tests := []struct{ ext, want string }{
		{"png", TypeImage}, {".JPG", TypeImage}, {"pdf", TypeDocument}, {"md", TypeDocument},
		{"mp3", TypeAudio}, {"mp4", TypeVideo}, {"dat", TypeCustom}, {"", TypeCustom},
	}
	for _, tc := range tests {
		if got := KindOf(tc.ext); got != tc.want {
			t.Errorf("KindOf(%q) = %q, want %q", tc.ext, got, tc.want)
		}
	}
}

func TestRules(t *testing.T) {
	tests := []struct {
		name  string
		rules Rules
		ext   string
		want  bool
	}{
		{"an image", Rules{}, "png", true},
		{"a document", Rules{}, "pdf", true},
		{"an unknown extension", Rules{}, "xyz", true},
		{"no extension", Rules{}, "", true},
		{"a program is blocked", Rules{}, "exe", false},
		{"blocked in any case, with a dot", Rules{}, ".BAT", false},
		{"an own list replaces the default", Rules{Blocked: []string{"txt"}}, "exe", true},
		{"an own list blocks its extensions", Rules{Blocked: []string{"txt"}}, "TXT", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rules.Allows(tc.ext); got != tc.want {
				t.Errorf("Allows(%q) = %v, want %v", tc.ext, got, tc.want)
			}
		})
	}

	limits := Rules{Limits: apps.SystemParameters{FileSizeLimit: 1, ImageFileSizeLimit: 2, AudioFileSizeLimit: 3, VideoFileSizeLimit: 4}}
	for ext, mb := range map[string]int64{"pdf": 1, "dat": 1, "png": 2, "wav": 3, "mov": 4} {
		if got := limits.SizeLimit(ext); got != mb<<20 {
			t.Errorf("SizeLimit(%q) = %d, want %d MB", ext, got, mb)
		}
	}
	if got := (Rules{}).SizeLimit("png"); got != int64(apps.DefaultSystemParameters.ImageFileSizeLimit)<<20 {
		t.Errorf("zero limits should fall back to the defaults, got %d", got)
	}
}

// fixture is a database with two apps and two end users of the first.
type fixture struct {
	db             *gorm.DB
	store          *Store
	appID, otherID string
	alice, bob     string // end user ids in appID
	carol          string // end user id in otherID
	noUploadsID    string
	dave           string // end user id in noUploadsID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	gdb := db.OpenTemp(t)
	ctx := context.Background()
	as := apps.NewStore(gdb)
	users := endusers.NewStore(gdb)
	f := &fixture{db: gdb, store: NewStore(gdb, t.TempDir())}
	for _, a := range []struct {
		id   *string
		yaml string
	}{{&f.appID, testApp}, {&f.otherID, testApp}, {&f.noUploadsID, noUploadApp}} {
		app, err := as.Import(ctx, []byte(a.yaml))
		if err != nil {
			t.Fatal(err)
		}
		*a.id = app.ID
	}
	for _, u := range []struct {
		id         *string
		app, label string
	}{{&f.alice, f.appID, "alice"}, {&f.bob, f.appID, "bob"}, {&f.carol, f.otherID, "carol"}, {&f.dave, f.noUploadsID, "dave"}} {
		eu, err := users.Resolve(ctx, u.app, u.label)
		if err != nil {
			t.Fatal(err)
		}
		*u.id = eu.ID
	}
	return f
}

func wantError(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v, want %d %s", err, status, code)
	}
	if ae.Status != status || ae.Code != code {
		t.Fatalf("error = %d %s (%s), want %d %s", ae.Status, ae.Code, ae.Message, status, code)
	}
}

func TestStage(t *testing.T) {
	f := newFixture(t)
	small := Rules{
		Limits: apps.SystemParameters{FileSizeLimit: 1, ImageFileSizeLimit: 1},
	}
	mb := int64(1 << 20)
	tests := []struct {
		name, file, mime string
		size             int64
		wantStatus       int
		wantCode         string
		wantMime         string
	}{
		{"image within the limit", "cat.png", "image/png", mb, 0, "", "image/png"},
		{"image one byte over the limit", "cat.png", "image/png", mb + 1, 413, apperr.CodeFileTooLarge, ""},
		{"empty document", "empty.txt", "text/plain", 0, 0, "", "text/plain"},
		{"octet-stream is replaced by the extension's type", "doc.pdf", "application/octet-stream", 10, 0, "", "application/pdf"},
		{"parameters of the declared type are dropped", "a.txt", "text/plain; charset=utf-8", 3, 0, "", "text/plain"},
		{"audio is stored whatever the app takes", "song.mp3", "audio/mpeg", 10, 0, "", "audio/mpeg"},
		{"a document one byte over the general limit", "big.pdf", "application/pdf", mb + 1, 413, apperr.CodeFileTooLarge, ""},
		{"blocked extension", "setup.exe", "application/octet-stream", 10, 400, CodeExtensionBlocked, ""},
		{"no declared type", "cat.png", "", 10, 415, apperr.CodeUnsupportedFileType, ""},
		{"unreadable declared type", "cat.png", "image/", 10, 415, apperr.CodeUnsupportedFileType, ""},
		{"no name", "  ", "image/png", 10, 400, apperr.CodeFilenameNotExists, ""},
		{"name with a path", "../../etc/passwd.txt", "text/plain", 10, 400, apperr.CodeInvalidParam, ""},
		{"name with a backslash", `..\win.txt`, "text/plain", 10, 400, apperr.CodeInvalidParam, ""},
		{"name with a control character", "a\x00.txt", "text/plain", 10, 400, apperr.CodeInvalidParam, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			content := bytes.Repeat([]byte("x"), int(tc.size))
			st, err := f.store.Stage(small, tc.file, tc.mime, bytes.NewReader(content))
			if tc.wantCode != "" {
				wantError(t, err, tc.wantStatus, tc.wantCode)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			row, err := st.Commit(context.Background(), f.appID, f.alice)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(content)
			if row.Size != tc.size || row.MimeType != tc.wantMime || row.Hash != hex.EncodeToString(sum[:]) {
				t.Errorf("row = %+v", row)
			}
			if row.StorageKey != "files/"+row.ID {
				t.Errorf("storage key %q should be files/<id>", row.StorageKey)
			}
			got, err := f.store.ReadAll(context.Background(), row)
			if err != nil || !bytes.Equal(got, content) {
				t.Errorf("stored bytes differ (%v)", err)
			}
		})
	}
	// Nothing is left behind by the refused uploads.
	entries, _ := os.ReadDir(filepath.Join(f.store.dataDir, dirName))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".upload-") {
			t.Errorf("temporary file %s was left behind", e.Name())
		}
	}
}

func TestLongNameIsShortened(t *testing.T) {
	name, err := cleanName(strings.Repeat("é", 300) + ".pdf")
	if err != nil {
		t.Fatal(err)
	}
	if n := len([]rune(name)); n != MaxNameLength || !strings.HasSuffix(name, ".pdf") {
		t.Errorf("name has %d characters: %q", n, name)
	}
}

func TestOpenForApp(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	row, err := f.store.Save(ctx, Rules{}, f.appID, f.alice, "a.txt", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, app, user, id string
		wantStatus          int
		wantCode            string
	}{
		{"owner", f.appID, "alice", row.ID, 200, ""},
		{"same app without a user", f.appID, "", row.ID, 200, ""},
		{"another end user of the app", f.appID, "bob", row.ID, 403, apperr.CodeFileAccessDenied},
		{"a user the app has never seen", f.appID, "mallory", row.ID, 403, apperr.CodeFileAccessDenied},
		{"another app", f.otherID, "", row.ID, 403, apperr.CodeFileAccessDenied},
		{"unknown id", f.appID, "alice", "3f8c1c9e-0000-4000-8000-000000000000", 404, apperr.CodeFileNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meta, r, err := f.store.OpenForApp(ctx, tc.app, tc.user, tc.id)
			if tc.wantCode != "" {
				wantError(t, err, tc.wantStatus, tc.wantCode)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			b, _ := io.ReadAll(r)
			if string(b) != "hello" || meta.Name != "a.txt" {
				t.Errorf("got %q (%s)", b, meta.Name)
			}
		})
	}
}

func TestGuardPermitted(t *testing.T) {
	allowLocal := Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	tests := []struct {
		addr string
		want bool
	}{
		{"93.184.216.34", true},
		{"2606:2800:220:1:248:1893:25c8:1946", true},
		{"127.0.0.1", false},
		{"127.8.8.8", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		{"fd00:ec2::254", false}, // AWS metadata over IPv6 (unique local)
		{"169.254.169.254", false},
		{"fe80::1", false},
		{"fe80::1%eth0", false},
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"::", false},
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"ff02::1", false},
		{"255.255.255.255", false},
		{"100.100.100.200", false}, // Alibaba Cloud metadata
		{"192.0.0.192", false},
		{"::ffff:127.0.0.1", false}, // IPv4-mapped loopback
		{"::ffff:10.0.0.1", false},
		{"64:ff9b::a00:1", false}, // NAT64 of 10.0.0.1
		{"2002:a00:1::", false},   // 6to4 of 10.0.0.1
		{"172.32.0.1", true},
	}
	var g Guard
	for _, tc := range tests {
		if got := g.Permitted(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Permitted(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if !allowLocal.Permitted(netip.MustParseAddr("127.0.0.1")) {
		t.Error("the allowlist should permit 127.0.0.1")
	}
	if allowLocal.Permitted(netip.MustParseAddr("127.0.0.2")) {
		t.Error("the allowlist should permit only what it lists")
	}
	if !allowLocal.Permitted(netip.MustParseAddr("::ffff:127.0.0.1")) {
		t.Error("an IPv4-mapped address should match the IPv4 allowlist entry")
	}
}

// fakeDNS resolves the names of the tests; every other name is unknown.
func fakeDNS(names map[string][]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		list, ok := names[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		out := make([]netip.Addr, len(list))
		for i, a := range list {
			out[i] = netip.MustParseAddr(a)
		}
		return out, nil
	}
}

func TestGuardOpen(t *testing.T) {
	var srvURL *url.URL
	mux := http.NewServeMux()
	mux.HandleFunc("/cat.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		io.WriteString(w, "PNG!")
	})
	mux.HandleFunc("/named", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Disposition", `attachment; filename="../report.pdf"`)
		io.WriteString(w, "%PDF")
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/to-loopback", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.2:"+srvURL.Port()+"/cat.png", http.StatusFound)
	})
	mux.HandleFunc("/to-private-name", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://intranet.test:"+srvURL.Port()+"/cat.png", http.StatusFound)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/to-ok", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/cat.png", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/to-ftp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://files.test/a", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	srvURL, _ = url.Parse(srv.URL)
	port := srvURL.Port()

	dns := fakeDNS(map[string][]string{
		"files.test":    {"127.0.0.1"},
		"intranet.test": {"10.0.0.7"},
		"metadata.test": {"169.254.169.254"},
		"mixed.test":    {"127.0.0.1", "192.168.0.10"},
		"v6local.test":  {"::1"},
		"localhost":     {"127.0.0.1", "::1"},
	})
	allowed := Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, LookupNetIP: dns, Timeout: 2 * time.Second}
	strict := Guard{LookupNetIP: dns}
	at := func(host, p string) string { return "http://" + host + ":" + port + p }

	tests := []struct {
		name      string
		guard     Guard
		url       string
		wantBody  string
		wantName  string
		wantBlock bool // the error wraps ErrBlockedAddress
	}{
		{"allowlisted literal address", allowed, at("127.0.0.1", "/cat.png"), "PNG!", "cat.png", false},
		{"allowlisted name", allowed, at("files.test", "/cat.png"), "PNG!", "cat.png", false},
		{"name from Content-Disposition, path dropped", allowed, at("127.0.0.1", "/named"), "%PDF", "report.pdf", false},
		{"redirect within the allowlist", allowed, at("127.0.0.1", "/to-ok"), "PNG!", "cat.png", false},
		{"loopback without an allowlist", strict, at("127.0.0.1", "/cat.png"), "", "", true},
		{"localhost without an allowlist", strict, at("localhost", "/cat.png"), "", "", true},
		{"IPv6 loopback", strict, "http://[::1]:" + port + "/cat.png", "", "", true},
		{"name resolving to loopback", strict, at("files.test", "/cat.png"), "", "", true},
		{"name resolving to a private address", allowed, at("intranet.test", "/cat.png"), "", "", true},
		{"name resolving to the metadata address", allowed, at("metadata.test", "/"), "", "", true},
		{"name resolving to a public and a private address", allowed, at("mixed.test", "/cat.png"), "", "", true},
		{"name resolving to IPv6 loopback", allowed, at("v6local.test", "/cat.png"), "", "", true},
		{"metadata address", allowed, "http://169.254.169.254/latest/meta-data/", "", "", true},
		{"metadata host name", allowed, "http://metadata.google.internal/computeMetadata/v1/", "", "", true},
		{"unspecified address", allowed, at("0.0.0.0", "/cat.png"), "", "", true},
		{"decimal-encoded loopback", strict, "http://2130706433:" + port + "/cat.png", "", "", false},
		{"redirect to a refused address", allowed, at("127.0.0.1", "/to-loopback"), "", "", true},
		{"redirect to a name resolving to a private address", allowed, at("127.0.0.1", "/to-private-name"), "", "", true},
		{"redirect to the metadata address", allowed, at("127.0.0.1", "/to-metadata"), "", "", true},
		{"endless redirects", allowed, at("127.0.0.1", "/loop"), "", "", false},
		{"redirect to another scheme", allowed, at("127.0.0.1", "/to-ftp"), "", "", false},
		{"error status", allowed, at("127.0.0.1", "/missing"), "", "", false},
		{"timeout", allowed, at("127.0.0.1", "/slow"), "", "", false},
		{"not http", allowed, "file:///etc/passwd", "", "", false},
		{"no host", allowed, "http:///x", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.guard.Open(context.Background(), tc.url)
			if tc.wantBody == "" {
				if err == nil {
					r.Close()
					t.Fatal("fetch succeeded, want a refusal")
				}
				wantError(t, err, 400, apperr.CodeInvalidParam)
				if got := errors.Is(err, ErrBlockedAddress); got != tc.wantBlock {
					t.Errorf("errors.Is(err, ErrBlockedAddress) = %v, want %v: %v", got, tc.wantBlock, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			b, _ := io.ReadAll(r.Body)
			if string(b) != tc.wantBody || r.Name != tc.wantName {
				t.Errorf("got %q named %q", b, r.Name)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	big := bytes.Repeat([]byte("x"), 2<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/photo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/jpeg")
		io.WriteString(w, "JPEG")
	})
	mux.HandleFunc("/big.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(big)
	})
	mux.HandleFunc("/big-unannounced.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.(http.Flusher).Flush() // no Content-Length: the size is only seen while reading
		w.Write(big)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f.store.Remote = Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	f.store.Limits = apps.SystemParameters{FileSizeLimit: 1, ImageFileSizeLimit: 1}

	alices, err := f.store.Save(ctx, Rules{}, f.appID, f.alice, "a.pdf", "application/pdf", strings.NewReader("%PDF"))
	if err != nil {
		t.Fatal(err)
	}
	custom, err := f.store.Save(ctx, Rules{}, f.appID, f.alice, "blob.dat", "application/octet-stream", strings.NewReader("??"))
	if err != nil {
		t.Fatal(err)
	}
	badCustom, err := f.store.Save(ctx, Rules{}, f.appID, f.alice, "tool.xyz", "application/octet-stream", strings.NewReader("MZ"))
	if err != nil {
		t.Fatal(err)
	}
	carols, err := f.store.Save(ctx, Rules{}, f.otherID, f.carol, "c.pdf", "application/pdf", strings.NewReader("%PDF"))
	if err != nil {
		t.Fatal(err)
	}
	local := func(typ, id string) Ref { return Ref{Type: typ, TransferMethod: LocalFile, UploadFileID: id} }
	remote := func(typ, path string) Ref { return Ref{Type: typ, TransferMethod: RemoteURL, URL: srv.URL + path} }

	tests := []struct {
		name       string
		app, user  string
		refs       []Ref
		wantStatus int
		wantCode   string
		check      func(t *testing.T, got []Resolved)
	}{
		{"no files", f.appID, f.alice, nil, 0, "", func(t *testing.T, got []Resolved) {
			if got != nil {
				t.Errorf("got %v", got)
			}
		}},
		{"the owner's upload", f.appID, f.alice, []Ref{local("document", alices.ID)}, 0, "", func(t *testing.T, got []Resolved) {
			if len(got) != 1 || got[0].File.ID != alices.ID {
				t.Fatalf("got %+v", got)
			}
			if b, _ := f.store.ReadAll(ctx, got[0].File); string(b) != "%PDF" {
				t.Errorf("bytes %q", b)
			}
		}},
		{"a custom file with a listed extension", f.appID, f.alice, []Ref{local("custom", custom.ID)}, 0, "", nil},
		{"a custom file with another extension", f.appID, f.alice, []Ref{local("custom", badCustom.ID)}, 400, apperr.CodeInvalidParam, nil},
		{"another user's upload", f.appID, f.bob, []Ref{local("document", alices.ID)}, 404, apperr.CodeFileNotFound, nil},
		{"another app's upload", f.appID, f.alice, []Ref{local("document", carols.ID)}, 404, apperr.CodeFileNotFound, nil},
		{"an unknown upload", f.appID, f.alice, []Ref{local("document", "3f8c1c9e-0000-4000-8000-000000000000")}, 404, apperr.CodeFileNotFound, nil},
		{"local_file without an id", f.appID, f.alice, []Ref{{Type: "document", TransferMethod: LocalFile}}, 400, apperr.CodeInvalidParam, nil},
		{"remote_url without a url", f.appID, f.alice, []Ref{{Type: "image", TransferMethod: RemoteURL}}, 400, apperr.CodeInvalidParam, nil},
		{"unknown transfer method", f.appID, f.alice, []Ref{{Type: "image", TransferMethod: "ftp"}}, 400, apperr.CodeInvalidParam, nil},
		{"unknown kind", f.appID, f.alice, []Ref{{Type: "hologram", TransferMethod: LocalFile, UploadFileID: alices.ID}}, 400, apperr.CodeInvalidParam, nil},
		{"kind the app does not take", f.appID, f.alice, []Ref{local("audio", alices.ID)}, 400, apperr.CodeInvalidParam, nil},
		{"more files than the number limit", f.appID, f.alice, []Ref{
			local("document", alices.ID), local("document", alices.ID), local("document", alices.ID), local("document", alices.ID),
		}, 400, apperr.CodeInvalidParam, nil},
		{"a remote file is fetched and stored for the user", f.appID, f.alice, []Ref{remote("image", "/photo")}, 0, "", func(t *testing.T, got []Resolved) {
			r := got[0]
			if r.File.Name != "photo.jpg" || r.File.MimeType != "image/jpeg" || *r.File.EndUserID != f.alice || r.RemoteURL != srv.URL+"/photo" {
				t.Errorf("got %+v", r.File)
			}
		}},
		{"a remote file above the size limit", f.appID, f.alice, []Ref{remote("image", "/big.png")}, 413, apperr.CodeFileTooLarge, nil},
		{"a remote file above the size limit without Content-Length", f.appID, f.alice, []Ref{remote("image", "/big-unannounced.png")}, 413, apperr.CodeFileTooLarge, nil},
		{"a remote file on a refused address", f.appID, f.alice, []Ref{{Type: "image", TransferMethod: RemoteURL, URL: "http://10.0.0.1/x.png"}}, 400, apperr.CodeInvalidParam, nil},
		{"an app without uploads ignores files", f.noUploadsID, f.dave, []Ref{local("document", alices.ID)}, 0, "", func(t *testing.T, got []Resolved) {
			if len(got) != 0 {
				t.Errorf("got %v", got)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.store.Resolve(ctx, tc.app, tc.user, tc.refs)
			if tc.wantCode != "" {
				wantError(t, err, tc.wantStatus, tc.wantCode)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestStoreWithoutDataDir(t *testing.T) {
	s := NewStore(db.OpenTemp(t), "")
	_, err := s.Stage(Rules{}, "a.txt", "text/plain", strings.NewReader("x"))
	wantError(t, err, 500, apperr.CodeInternal)
}

func ExampleGuard() {
	g := Guard{}
	_, err := g.Open(context.Background(), "http://169.254.169.254/latest/meta-data/")
	fmt.Println(errors.Is(err, ErrBlockedAddress))
	// Output: true
}
