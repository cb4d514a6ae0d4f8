package codec

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

func ring(t *testing.T, ids ...string) (*Keyring, []string) {
	t.Helper()
	var specs []string
	for _, id := range ids {
		k, err := NewKey(id)
		require.NoError(t, err)
		specs = append(specs, k)
	}
	k, err := ParseKeys(strings.Join(specs, ","))
	require.NoError(t, err)
	return k, specs
}

func payload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

func TestRoundTripHidesThePlainText(t *testing.T) {
	k, _ := ring(t, "k1")
	in := payload(t, map[string]string{"to": "+31612345678", "text": "Your code is 482913"})
	sealed, err := k.Encode([]*commonpb.Payload{in})
	require.NoError(t, err)
	require.Equal(t, Encoding, string(sealed[0].Metadata[converter.MetadataEncoding]))
	require.Equal(t, "k1", string(sealed[0].Metadata[MetadataKeyID]))
	raw, _ := protojson.Marshal(sealed[0])
	for _, secret := range []string{"31612345678", "482913", "json/plain"} {
		require.NotContains(t, string(raw), secret)
	}
	opened, err := k.Decode(sealed)
	require.NoError(t, err)
	var back map[string]string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(opened[0], &back))
	require.Equal(t, "Your code is 482913", back["text"])

	// The same value seals differently each time (a fresh nonce).
	again, err := k.Encode([]*commonpb.Payload{in})
	require.NoError(t, err)
	require.NotEqual(t, sealed[0].Data, again[0].Data)

	// A payload that was never sealed passes through.
	plain, err := k.Decode([]*commonpb.Payload{in})
	require.NoError(t, err)
	require.Equal(t, in, plain[0])
}

func TestATamperedPayloadIsRefused(t *testing.T) {
	k, _ := ring(t, "k1", "k2")
	sealed, err := k.Encode([]*commonpb.Payload{payload(t, "Your code is 482913")})
	require.NoError(t, err)
	flipped := &commonpb.Payload{Metadata: sealed[0].Metadata, Data: bytes.Clone(sealed[0].Data)}
	flipped.Data[len(flipped.Data)-1] ^= 1
	_, err = k.Decode([]*commonpb.Payload{flipped})
	require.ErrorContains(t, err, "was altered")
	// Moved under another key id of the same ring: the id is authenticated.
	moved := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding), MetadataKeyID: []byte("k2")}, Data: sealed[0].Data}
	_, err = k.Decode([]*commonpb.Payload{moved})
	require.ErrorContains(t, err, "does not open")
	_, err = k.Decode([]*commonpb.Payload{{Metadata: sealed[0].Metadata, Data: sealed[0].Data[:5]}})
	require.ErrorContains(t, err, "truncated")
}

// After a rotation the new key seals and the old one still opens what
// it sealed; a ring without the old key says which key is missing.
func TestRotatedOutKeyStillOpens(t *testing.T) {
	old, oldSpecs := ring(t, "2026-05")
	sealedOld, err := old.Encode([]*commonpb.Payload{payload(t, "order 58213")})
	require.NoError(t, err)
	newKey, err := NewKey("2026-11")
	require.NoError(t, err)
	rotated, err := ParseKeys(newKey + "," + oldSpecs[0])
	require.NoError(t, err)
	require.Equal(t, "2026-11", rotated.Current())
	opened, err := rotated.Decode(sealedOld)
	require.NoError(t, err)
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(opened[0], &s))
	require.Equal(t, "order 58213", s)
	sealedNew, err := rotated.Encode([]*commonpb.Payload{payload(t, "x")})
	require.NoError(t, err)
	require.Equal(t, "2026-11", string(sealedNew[0].Metadata[MetadataKeyID]))

	onlyNew, err := ParseKeys(newKey)
	require.NoError(t, err)
	_, err = onlyNew.Decode(sealedOld)
	require.ErrorIs(t, err, ErrUnknownKey)
	require.ErrorContains(t, err, `"2026-05"`)
}

func TestBadKeysAreRefusedWithoutPrintingThem(t *testing.T) {
	for spec, want := range map[string]string{
		"":                                  "no key given",
		"nocolon":                           "written ID:BASE64KEY",
		"k1:c2hvcnQ=":                       "not 32 bytes",
		"bad id:" + strings.Repeat("A", 44): "key id",
	} {
		_, err := ParseKeys(spec)
		require.ErrorContains(t, err, want, spec)
		require.NotContains(t, err.Error(), "c2hvcnQ=")
	}
	k, err := NewKey("k1")
	require.NoError(t, err)
	_, err = ParseKeys(k + "," + k)
	require.ErrorContains(t, err, "given twice")

	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	id, key, _ := strings.Cut(k, ":")
	require.NoError(t, os.WriteFile(file, []byte("# rotated 2026-11\n"+id+" "+key+"\n"), 0o600))
	r, err := FromEnv(func(name string) string { return map[string]string{EnvKeyFile: file}[name] })
	require.NoError(t, err)
	require.Equal(t, "k1", r.Current())
	require.NotContains(t, r.String(), key)
	none, err := FromEnv(func(string) string { return "" })
	require.NoError(t, err)
	require.Nil(t, none, "no keys: no encryption")
	_, err = FromEnv(func(name string) string { return map[string]string{EnvKeyFile: file, EnvKeys: k}[name] })
	require.ErrorContains(t, err, "one way")
}

func TestCodecServerNeedsItsTokenAndAnswersTheUI(t *testing.T) {
	k, _ := ring(t, "k1")
	const ui = "http://127.0.0.1:8233"
	srv := httptest.NewServer(Handler(k, "t0ken", Origins(ui)))
	defer srv.Close()
	sealed, err := k.Encode([]*commonpb.Payload{payload(t, "Your code is 482913")})
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	require.NoError(t, err)

	post := func(path, auth string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", ui)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, text := post("/decode", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.NotContains(t, text, "482913")
	resp, _ = post("/decode", "Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	for _, tc := range []struct{ path, auth string }{{"/decode", "Bearer t0ken"}, {"/t0ken/decode", ""}} {
		resp, text = post(tc.path, tc.auth)
		require.Equal(t, http.StatusOK, resp.StatusCode, text)
		require.Equal(t, ui, resp.Header.Get("Access-Control-Allow-Origin"))
		var out commonpb.Payloads
		require.NoError(t, protojson.Unmarshal([]byte(text), &out))
		var s string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(out.Payloads[0], &s))
		require.Equal(t, "Your code is 482913", s)
	}

	// The browser's preflight from the UI's origin; another origin gets no CORS grant.
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	// No token configured: nothing is served.
	open := httptest.NewServer(Handler(k, "", nil))
	defer open.Close()
	r2, err := http.Post(open.URL+"/decode", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	_ = r2.Body.Close()
	require.Equal(t, http.StatusUnauthorized, r2.StatusCode)
}

func TestASwappedKeyIsNotPrinted(t *testing.T) {
	k, err := NewKey("k1")
	require.NoError(t, err)
	id, key, _ := strings.Cut(k, ":")
	_, err = ParseKeys(key + ":" + id)
	require.Error(t, err)
	require.NotContains(t, err.Error(), key[:20])
}

// frontend fails the first start with Unavailable, as a frontend that
// is going away does, and records what each attempt carried.
type frontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	mu     sync.Mutex
	starts []*workflowservice.StartWorkflowExecutionRequest
}

func (f *frontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{}, nil
}

func (f *frontend) StartWorkflowExecution(_ context.Context, r *workflowservice.StartWorkflowExecutionRequest) (*workflowservice.StartWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, r)
	if len(f.starts) == 1 {
		return nil, status.Error(codes.Unavailable, "going away")
	}
	return &workflowservice.StartWorkflowExecutionResponse{RunId: "r1", Started: true}, nil
}

// A request the SDK sends again after Unavailable is sealed once, like
// the first: a reader opens it with one decode.
func TestARetriedRequestIsSealedOnce(t *testing.T) {
	k, _ := ring(t, "k1")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	f := &frontend{}
	workflowservice.RegisterWorkflowServiceServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	opts := client.Options{HostPort: l.Addr().String()}
	require.NoError(t, k.Apply(&opts))
	c, err := client.Dial(opts)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "order-1-shipped", TaskQueue: "sms"}, "SendSMS", "Your code is 482913")
	require.NoError(t, err)
	require.Len(t, f.starts, 2, "the SDK retried the start")
	for i, r := range f.starts {
		p := r.GetInput().GetPayloads()[0]
		require.Equal(t, Encoding, string(p.Metadata[converter.MetadataEncoding]), "attempt %d sealed", i+1)
		opened, err := k.Decode([]*commonpb.Payload{p})
		require.NoError(t, err)
		var s string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(opened[0], &s), "attempt %d opens with one decode", i+1)
		require.Equal(t, "Your code is 482913", s)
	}
}

// A worker outside dev mode marks every payload that reaches it unsealed;
// its data converter then refuses to decode one (a run's input: the run
// fails before it does anything), while a raw value passes, for the run
// to refuse a decision signal in its timeline, where a decoder that tries
// says why. Sealed payloads open as before.
func TestAWorkerRefusesUnsealedPayloads(t *testing.T) {
	t.Parallel()
	k, _ := ring(t, "k1")
	dc := converter.GetDefaultDataConverter()
	plain, err := dc.ToPayload(map[string]string{"to": "+31612345678"})
	require.NoError(t, err)
	sealedIn, err := k.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)

	var opts client.Options
	require.NoError(t, k.ApplyRefusingUnsealed(&opts))
	require.NotNil(t, opts.DataConverter)
	got, err := refusing{k, true}.Decode([]*commonpb.Payload{plain, sealedIn[0]})
	require.NoError(t, err)
	require.True(t, Unsealed(got[0]), "the plain payload is marked")
	require.False(t, Unsealed(got[1]), "the sealed one opened")
	require.Equal(t, "json/plain", string(got[0].GetMetadata()[MetadataPlainEncoding]))
	require.Equal(t, "json/plain", string(plain.GetMetadata()["encoding"]), "the caller's payload is not changed")

	var v map[string]string
	require.ErrorIs(t, opts.DataConverter.FromPayload(got[0], &v), ErrUnsealed)
	require.ErrorIs(t, opts.DataConverter.FromPayloads(&commonpb.Payloads{Payloads: got}, &v, &v), ErrUnsealed)
	require.NoError(t, opts.DataConverter.FromPayload(got[1], &v))
	require.Equal(t, "+31612345678", v["to"])
	var raw converter.RawValue
	require.NoError(t, opts.DataConverter.FromPayload(got[0], &raw), "a raw value passes, for the run to refuse")
	err = dc.FromPayload(raw.Payload(), &v)
	require.ErrorContains(t, err, "unsealed (outside dev mode the worker takes only payloads sealed with its keys")

	var plainOpts client.Options
	require.NoError(t, k.Apply(&plainOpts))
	// Apply alone leaves payloads that arrive plain readable (dev mode,
	// --accept-unsealed, smsctl on a run from before the keys).
	got, err = refusing{k, false}.Decode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	require.False(t, Unsealed(got[0]), "a plain payload is not marked")
	v = nil
	require.NoError(t, plainOpts.DataConverter.FromPayload(got[0], &v))
	require.Equal(t, "+31612345678", v["to"])
}

// The key file takes the lines SMSORCH_CODEC_KEYS is written in too, and
// the published example key is known under any id.
func TestKeyFileLinesAndExampleKeys(t *testing.T) {
	t.Parallel()
	k1, err := NewKey("2026-12")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(file, []byte(k1+"\n"), 0o600))
	r, err := FromEnv(func(name string) string { return map[string]string{EnvKeysFile: file}[name] })
	require.NoError(t, err)
	require.Equal(t, "2026-12", r.Current())
	require.Empty(t, r.Example())
	_, err = FromEnv(func(name string) string { return map[string]string{EnvKeysFile: file, EnvKeyFile: file}[name] })
	require.ErrorContains(t, err, "give the keys one way")
	ex, err := ParseKeys(k1 + ",old:pOq2h7o2y0uB04coFoIxkS2ZUjTKFd4cPp8aMs2bMf0=")
	require.NoError(t, err)
	require.Equal(t, "old", ex.Example())
}
