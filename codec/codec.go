// Package codec encrypts what the orchestrator puts into Temporal: every
// payload (workflow and activity inputs and results, signals, queries)
// and failure messages are sealed with AES-256-GCM before they leave the
// process, so recipients and message texts never stand in plain text in
// Temporal's history, database or web UI.
//
// Keys have ids; the id of the key that sealed a payload travels in its
// metadata, so keys rotate: the first key of the ring seals, every key
// of the ring opens. Keys come from the environment or a file, never
// from flags:
//
//	SMSORCH_CODEC_KEYS=2026-11:BASE64KEY,2026-05:OLDERKEY
//	SMSORCH_CODEC_KEY_FILE=/run/secrets/smsorch-codec-keys   (lines "id base64key" or "id:base64key", first seals)
//	SMSORCH_CODEC_KEYS_FILE=…                                (the same, by the Docker secrets convention)
//
// `smsctl codec-key` prints a new key. The codec server (Handler) lets the
// Temporal web UI show decrypted payloads to those who hold its token.
package codec

import (
	"bufio"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Environment variables that hold the keys.
const (
	EnvKeys    = "SMSORCH_CODEC_KEYS"
	EnvKeyFile = "SMSORCH_CODEC_KEY_FILE"
	// EnvKeysFile is EnvKeyFile under the NAME_FILE convention of Docker
	// and Kubernetes secrets.
	EnvKeysFile = EnvKeys + "_FILE"
)

// Payload metadata of a sealed payload.
const (
	// Encoding marks a payload this codec sealed.
	Encoding = "binary/encrypted"
	// MetadataKeyID names the key that sealed it.
	MetadataKeyID = "encryption-key-id"
)

// ErrUnknownKey is a payload sealed with a key the ring does not hold.
var ErrUnknownKey = errors.New("codec: the payload was sealed with a key this process does not have")

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Keyring is the set of keys: the first seals, all open.
type Keyring struct {
	current  string
	aeads    map[string]cipher.AEAD
	ids      []string
	macKeys  map[string][]byte // id → the key of MAC, derived from the key
	examples []string          // ids of keys that were published as examples
	unopened *unopenedLog      // the last payload it could not open, for readiness
}

// unopenedLog is Keyring.Unopened's record.
type unopenedLog struct {
	sync.Mutex
	why string
	at  time.Time
}

// publishedExamples are keys this project has printed in an example
// file: whoever reads its history can open what they seal.
var publishedExamples = []string{"pOq2h7o2y0uB04coFoIxkS2ZUjTKFd4cPp8aMs2bMf0="}

// ParseKeys reads "id:base64key,id:base64key" (the first seals). Each
// key is 32 bytes (AES-256) in standard or URL base64.
func ParseKeys(spec string) (*Keyring, error) {
	pairs, err := parsePairs(spec)
	if err != nil {
		return nil, err
	}
	return newKeyring(pairs)
}

// parsePairs splits "id:base64key,id:base64key" into its pairs.
func parsePairs(spec string) ([][2]string, error) {
	var pairs [][2]string
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, key, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("codec: a key is written ID:BASE64KEY (as smsctl codec-key prints it); one entry has no id")
		}
		pairs = append(pairs, [2]string{strings.TrimSpace(id), strings.TrimSpace(key)})
	}
	return pairs, nil
}

// ParseKeyFile reads lines "id base64key", or "id:base64key" as
// SMSORCH_CODEC_KEYS writes them (blank lines and # comments skipped);
// the first key seals.
func ParseKeyFile(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("codec: read the key file: %w", err)
	}
	defer func() { _ = f.Close() }()
	var pairs [][2]string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 1 && strings.Contains(line, ":") {
			more, err := parsePairs(line)
			if err != nil {
				return nil, fmt.Errorf("codec: key file %s line %d: %w", path, n, err)
			}
			pairs = append(pairs, more...)
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("codec: key file %s line %d: write \"ID BASE64KEY\" or \"ID:BASE64KEY\"", path, n)
		}
		pairs = append(pairs, [2]string{fields[0], fields[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("codec: read the key file %s: %w", path, err)
	}
	return newKeyring(pairs)
}

// FromEnv loads the keys from SMSORCH_CODEC_KEYS or the file named by
// SMSORCH_CODEC_KEY_FILE; nil (no encryption) when neither is set.
func FromEnv(getenv func(string) string) (*Keyring, error) {
	spec, file, file2 := getenv(EnvKeys), getenv(EnvKeyFile), getenv(EnvKeysFile)
	set := 0
	for _, v := range []string{spec, file, file2} {
		if v != "" {
			set++
		}
	}
	if file == "" {
		file = file2
	}
	switch {
	case set > 1:
		return nil, fmt.Errorf("codec: more than one of %s, %s and %s is set: give the keys one way", EnvKeys, EnvKeyFile, EnvKeysFile)
	case spec != "":
		return ParseKeys(spec)
	case file != "":
		return ParseKeyFile(file)
	}
	return nil, nil
}

func newKeyring(pairs [][2]string) (*Keyring, error) {
	if len(pairs) == 0 {
		return nil, errors.New("codec: no key given")
	}
	k := &Keyring{aeads: map[string]cipher.AEAD{}, macKeys: map[string][]byte{}, unopened: &unopenedLog{}}
	for _, p := range pairs {
		id, enc := p[0], p[1]
		if !keyIDPattern.MatchString(id) {
			// Not echoed: an entry written KEY:ID would print the key.
			return nil, errors.New("codec: a key id is 1 to 64 letters, digits, '.', '_' or '-', written before the key (ID:BASE64KEY, as smsctl codec-key prints it)")
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("codec: key id %s is given twice", id)
		}
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			raw, err = base64.URLEncoding.DecodeString(enc)
		}
		if err != nil || len(raw) != 32 {
			// Never the key itself in an error.
			return nil, fmt.Errorf("codec: key %s is not 32 bytes of base64 (AES-256): make one with `smsctl codec-key`", id)
		}
		for _, ex := range publishedExamples {
			if b, _ := base64.StdEncoding.DecodeString(ex); subtle.ConstantTimeCompare(b, raw) == 1 {
				k.examples = append(k.examples, id)
			}
		}
		if strings.HasPrefix(strings.ToLower(id), "example") && !slices.Contains(k.examples, id) {
			k.examples = append(k.examples, id)
		}
		derive := hmac.New(sha256.New, raw)
		derive.Write([]byte("smsorch fingerprint key v1"))
		k.macKeys[id] = derive.Sum(nil)
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("codec: key %s: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec: key %s: %w", id, err)
		}
		k.aeads[id] = aead
		k.ids = append(k.ids, id)
	}
	k.current = k.ids[0]
	return k, nil
}

// NewKey returns a fresh key as "id:base64key" with the given id.
func NewKey(id string) (string, error) {
	if !keyIDPattern.MatchString(id) {
		return "", fmt.Errorf("codec: key id %q: use 1 to 64 letters, digits, '.', '_' or '-'", id)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return id + ":" + base64.StdEncoding.EncodeToString(raw), nil
}

// Example is the id of a key in the ring that was published as an
// example (its id begins with "example", or its bytes were printed in
// an example file), or "" when there is none. A worker outside dev mode
// refuses such a ring.
func (k *Keyring) Example() string {
	if k == nil || len(k.examples) == 0 {
		return ""
	}
	return k.examples[0]
}

// Current is the id of the key that seals.
func (k *Keyring) Current() string { return k.current }

// IDs are the ids of every key, the sealing one first.
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// String never shows a key.
func (k *Keyring) String() string {
	return fmt.Sprintf("AES-256-GCM keys %s (sealing with %s)", strings.Join(k.ids, ", "), k.current)
}

// Encode seals each payload under the current key; the key id and the
// encoding go in the metadata, the whole original payload (its metadata
// too) in the data.
func (k *Keyring) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := k.aeads[k.current]
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		if string(p.GetMetadata()[converter.MetadataEncoding]) == Encoding {
			out[i] = p // sealed already (a request sent again): never twice
			continue
		}
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		nonce := make([]byte, aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		// The key id is authenticated with the data: a payload cannot be
		// moved under another id.
		sealed := aead.Seal(nonce, nonce, plain, []byte(k.current))
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding), MetadataKeyID: []byte(k.current)},
			Data:     sealed,
		}
	}
	return out, nil
}

// Decode opens each sealed payload; others pass unchanged (payloads
// written before encryption was turned on stay readable).
func (k *Keyring) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := k.aeads[id]
		if !ok {
			return nil, fmt.Errorf("%w (key id %q; this process has %s): add that key to the ring", ErrUnknownKey, id, strings.Join(k.ids, ", "))
		}
		data := p.GetData()
		if len(data) < aead.NonceSize() {
			return nil, fmt.Errorf("codec: a payload sealed with key %s is truncated", id)
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("codec: a payload sealed with key %s does not open: it was altered, or the key is not the one that sealed it", id)
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(plain, &orig); err != nil {
			return nil, fmt.Errorf("codec: a payload sealed with key %s: %w", id, err)
		}
		out[i] = &orig
	}
	return out, nil
}

// Apply makes a client seal every payload it sends and open every one
// it receives, at the gRPC layer: requests a program builds itself (the
// starter's raw StartWorkflowExecution, say) are sealed as surely as the
// SDK's own. Failure messages and stack traces, which may quote what was
// sent, move into a sealed payload first. Search attributes stay plain
// (the orchestrator's hold no personal data). A payload sealed under a
// key the ring lacks is left sealed, and reading it is an error that
// names the key (ErrUnopened); the rest of the answer that carries it
// stays readable. A nil ring leaves opts alone.
func (k *Keyring) Apply(opts *client.Options) error {
	if k == nil {
		return nil
	}
	return k.applyOpening(opts, false)
}

func (k *Keyring) apply(opts *client.Options, codec converter.PayloadCodec) error {
	failures, err := converter.NewFailureGRPCClientInterceptor(converter.NewFailureGRPCClientInterceptorOptions{EncodeCommonAttributes: true})
	if err != nil {
		return fmt.Errorf("codec: %w", err)
	}
	payloads, err := converter.NewPayloadCodecGRPCClientInterceptor(converter.PayloadCodecGRPCClientInterceptorOptions{Codecs: []converter.PayloadCodec{codec}})
	if err != nil {
		return fmt.Errorf("codec: %w", err)
	}
	// A copy of each request is sealed, never the caller's: the SDK sends
	// the same request again on a retry, which must not seal it twice or
	// replace a failure's message already moved into a payload. Failures
	// first: their attributes become a payload, which is then sealed.
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(copyRequest, failures, payloads))
	return nil
}

// copyRequest hands the interceptors after it a copy of the request.
func copyRequest(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if m, ok := req.(proto.Message); ok {
		req = proto.Clone(m)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Sealed strings: personal data kept outside Temporal (the ledger's
// recipients and texts) under the same keys as the payloads.
const (
	sealedPrefix = "sealed:v1:"
	macPrefix    = "hmac:"
)

// IsSealedString reports whether s was made by SealString.
func IsSealedString(s string) bool { return strings.HasPrefix(s, sealedPrefix) }

// SealedUnder is how a value SealString sealed under key id begins.
func SealedUnder(id string) string { return sealedPrefix + id + ":" }

// IsMAC reports whether s was made by MAC.
func IsMAC(s string) bool { return strings.HasPrefix(s, macPrefix) }

// SealString seals plain under the current key, bound to context (a
// column's name, say, so a value cannot be moved to another column):
// "sealed:v1:<key id>:<base64>".
func (k *Keyring) SealString(plain, context string) (string, error) {
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("codec: %w", err)
	}
	sealed := aead.Seal(nonce, nonce, []byte(plain), []byte(k.current+"\x00"+context))
	return SealedUnder(k.current) + base64.RawStdEncoding.EncodeToString(sealed), nil
}

// OpenString opens what SealString sealed with any key of the ring.
func (k *Keyring) OpenString(s, context string) (string, error) {
	rest, ok := strings.CutPrefix(s, sealedPrefix)
	if !ok {
		return "", errors.New("codec: not a sealed value")
	}
	id, enc, ok := strings.Cut(rest, ":")
	if !ok {
		return "", errors.New("codec: a sealed value without its key id")
	}
	aead, ok := k.aeads[id]
	if !ok {
		return "", fmt.Errorf("%w (key id %q; this process has %s): add that key to the ring", ErrUnknownKey, id, strings.Join(k.ids, ", "))
	}
	data, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil || len(data) < aead.NonceSize() {
		return "", fmt.Errorf("codec: a value sealed with key %s is damaged", id)
	}
	plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id+"\x00"+context))
	if err != nil {
		return "", fmt.Errorf("codec: a value sealed with key %s does not open: it was altered or moved, or the key is not the one that sealed it", id)
	}
	return string(plain), nil
}

// MAC is a keyed fingerprint of data under the current key, for
// comparing values that must not be guessable from what is stored (a
// one-time code's request bytes): "hmac:<key id>:<hex>". Its key is
// derived from the sealing key, never the key itself.
func (k *Keyring) MAC(data []byte) string {
	return macPrefix + k.current + ":" + hex.EncodeToString(k.mac(k.current, data))
}

// MACMatches reports whether stored (from MAC, under any key of the
// ring) is data's fingerprint. ok is false when stored is not a MAC or
// its key is not in the ring.
func (k *Keyring) MACMatches(stored string, data []byte) (match, ok bool) {
	rest, isMAC := strings.CutPrefix(stored, macPrefix)
	id, sum, cut := strings.Cut(rest, ":")
	if !isMAC || !cut || k.macKeys[id] == nil {
		return false, false
	}
	want, err := hex.DecodeString(sum)
	if err != nil {
		return false, false
	}
	return hmac.Equal(want, k.mac(id, data)), true
}

func (k *Keyring) mac(id string, data []byte) []byte {
	m := hmac.New(sha256.New, k.macKeys[id])
	m.Write(data)
	return m.Sum(nil)
}
