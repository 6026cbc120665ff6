package apps

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"appkb/internal/platform/apperr"
)

// An app package (.ifpkg) is a zip archive with two members: manifest.yaml,
// which names the definition file with its size and SHA-256, and that file
// (normally app.yaml), the DSL text byte for byte.

// ManifestName is the package member that describes the package.
const ManifestName = "manifest.yaml"

// PackageFormat and PackageFormatVersion identify an app package manifest.
const (
	PackageFormat        = "dify.app"
	PackageFormatVersion = 1
)

// MaxPackageSize bounds an app package: a full-size definition stored
// without compression, plus room for the manifest and the zip structure.
const MaxPackageSize = MaxDefinitionSize + 1<<20

const maxManifestSize = 64 << 10

// IsPackage reports whether data is a zip archive (an app package) rather
// than DSL text. YAML text can never start with these bytes.
func IsPackage(data []byte) bool {
	return bytes.HasPrefix(data, []byte("PK\x03\x04")) || bytes.HasPrefix(data, []byte("PK\x05\x06"))
}

// PackageManifest is the content of manifest.yaml.
type PackageManifest struct {
	Format        string         `yaml:"format"`
	FormatVersion int            `yaml:"format_version"`
	Apps          []PackageEntry `yaml:"apps"`
	Extra         map[string]any `yaml:",inline"`
}

// PackageEntry names one definition file of a package.
type PackageEntry struct {
	Path   string         `yaml:"path"`
	Size   int64          `yaml:"size"`
	SHA256 string         `yaml:"sha256"`
	Extra  map[string]any `yaml:",inline"`
}

// Unpack returns the definition text of data: data itself when it is not a
// package, otherwise the package's definition file once its size and
// checksum match the manifest. A package with any other member, or more than
// one app, is refused.
func Unpack(data []byte) ([]byte, error) {
	if !IsPackage(data) {
		return data, nil
	}
	if len(data) > MaxPackageSize {
		return nil, apperr.InvalidParam("app package is larger than %d bytes", MaxPackageSize)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, apperr.InvalidParam("app package is not a readable zip archive: %v", err)
	}
	members := map[string]*zip.File{}
	for _, f := range zr.File {
		if _, dup := members[f.Name]; dup {
			return nil, apperr.InvalidParam("app package holds %q twice", f.Name)
		}
		members[f.Name] = f
	}

	mf := members[ManifestName]
	if mf == nil {
		return nil, apperr.InvalidParam("app package has no %s", ManifestName)
	}
	raw, err := readMember(mf, maxManifestSize)
	if err != nil {
		return nil, err
	}
	var manifest PackageManifest
	if err := yaml.Unmarshal(raw, &manifest); err != nil {
		return nil, apperr.InvalidParam("%s of the app package is not valid: %s", ManifestName, yamlMessage(err))
	}
	if manifest.Format != PackageFormat || manifest.FormatVersion != PackageFormatVersion {
		return nil, apperr.InvalidParam("app package manifest declares format %q version %d; expected %q version %d",
			manifest.Format, manifest.FormatVersion, PackageFormat, PackageFormatVersion)
	}
	if len(manifest.Apps) != 1 {
		return nil, apperr.InvalidParam("app package manifest lists %d apps; exactly one is supported", len(manifest.Apps))
	}
	entry := manifest.Apps[0]
	for name := range members {
		if name != ManifestName && name != entry.Path {
			return nil, apperr.InvalidParam("app package holds %q, which its manifest does not list", name)
		}
	}
	af := members[entry.Path]
	if af == nil {
		return nil, apperr.InvalidParam("app package has no %q, which its manifest lists", entry.Path)
	}
	text, err := readMember(af, MaxDefinitionSize)
	if err != nil {
		return nil, err
	}
	if entry.Size > 0 && int64(len(text)) != entry.Size {
		return nil, apperr.InvalidParam("%s in the app package has %d bytes; its manifest says %d", entry.Path, len(text), entry.Size)
	}
	want := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(entry.SHA256), "sha256:"))
	if want == "" {
		return nil, apperr.InvalidParam("app package manifest gives no sha256 for %s", entry.Path)
	}
	sum := sha256.Sum256(text)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, apperr.InvalidParam("%s in the app package does not match the sha256 in its manifest", entry.Path)
	}
	return text, nil
}

// readMember reads one package member, refusing members larger than limit.
func readMember(f *zip.File, limit int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(limit) {
		return nil, apperr.InvalidParam("%s in the app package is larger than %d bytes", f.Name, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, apperr.InvalidParam("cannot read %s in the app package: %v", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, apperr.InvalidParam("cannot read %s in the app package: %v", f.Name, err)
	}
	if int64(len(b)) > limit {
		return nil, apperr.InvalidParam("%s in the app package is larger than %d bytes", f.Name, limit)
	}
	return b, nil
}

// Pack builds an app package around definition text, with the manifest
// Unpack checks. It is the inverse of Unpack.
func Pack(text []byte) ([]byte, error) {
	const appPath = "app.yaml"
	sum := sha256.Sum256(text)
	manifest, err := yaml.Marshal(PackageManifest{
		Format:        PackageFormat,
		FormatVersion: PackageFormatVersion,
		Apps:          []PackageEntry{{Path: appPath, Size: int64(len(text)), SHA256: hex.EncodeToString(sum[:])}},
	})
	if err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range []struct {
		name string
		data []byte
	}{{ManifestName, manifest}, {appPath, text}} {
		w, err := zw.Create(m.name)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(m.data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
