package files

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// PreviewTTL is how long a signed preview link of an uploaded file works
// (Dify's default files access timeout is five minutes too).
const PreviewTTL = 5 * time.Minute

// PreviewPathPrefix is where signed preview links point:
// PreviewPathPrefix + id + "/file-preview?timestamp=…&nonce=…&sign=…",
// the shape of Dify's signed file links. It lies outside the API's base
// path because the link itself is the credential.
const PreviewPathPrefix = "/files/"

// PreviewSigner signs and checks preview links of uploaded files, such as
// the url of a message's local files.
type PreviewSigner struct {
	key []byte
}

// NewPreviewSigner makes a signer with a fresh random key.
func NewPreviewSigner() (*PreviewSigner, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("file preview key: %w", err)
	}
	return &PreviewSigner{key: k}, nil
}

func (p *PreviewSigner) sign(fileID, timestamp, nonce string) string {
	m := hmac.New(sha256.New, p.key)
	fmt.Fprintf(m, "file-preview|%s|%s|%s", fileID, timestamp, nonce)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// URL is a signed preview link to the file, issued at now.
func (p *PreviewSigner) URL(fileID string, now time.Time) string {
	n := make([]byte, 16)
	_, _ = rand.Read(n)
	ts, nonce := strconv.FormatInt(now.Unix(), 10), hex.EncodeToString(n)
	q := url.Values{"timestamp": {ts}, "nonce": {nonce}, "sign": {p.sign(fileID, ts, nonce)}}
	return PreviewPathPrefix + url.PathEscape(fileID) + "/file-preview?" + q.Encode()
}

// Valid reports whether sign signs a link to the file issued at timestamp
// with nonce, and the link is not older than PreviewTTL at now.
func (p *PreviewSigner) Valid(fileID, timestamp, nonce, sign string, now time.Time) bool {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || nonce == "" {
		return false
	}
	if age := now.Unix() - ts; age < -60 || age > int64(PreviewTTL/time.Second) {
		return false
	}
	return hmac.Equal([]byte(sign), []byte(p.sign(fileID, timestamp, nonce)))
}
