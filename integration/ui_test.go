package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// uiClient speaks to the embedded web UI's server the way the UI's own
// pages do: its /api/v1 routes, with the CSRF cookie echoed in a header.
type uiClient struct {
	t     *testing.T
	hc    *http.Client
	base  string
	token string
}

func newUIClient(t *testing.T) *uiClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &uiClient{t: t, hc: &http.Client{Jar: jar, Timeout: 10 * time.Second}, base: stack.Stack.UIURL()}
	resp, err := c.hc.Get(c.base + "/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the UI page")
	u, _ := url.Parse(c.base)
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "_csrf" {
			c.token = ck.Value
		}
	}
	require.NotEmpty(t, c.token, "the UI sets its CSRF cookie")
	return c
}

func (c *uiClient) do(method, path string, body any, out any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+"/api/v1/namespaces/"+stack.Namespace+path, rd)
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", c.token)
	resp, err := c.hc.Do(req)
	require.NoError(c.t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	require.Equal(c.t, http.StatusOK, resp.StatusCode, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(c.t, json.Unmarshal(raw, out))
	}
}

// payload is a Temporal payload as the HTTP API writes it (bytes in base64).
type payload struct {
	Metadata map[string][]byte `json:"metadata"`
	Data     []byte            `json:"data"`
}

func (p payload) decode(t *testing.T, v any) {
	t.Helper()
	require.Equal(t, "json/plain", string(p.Metadata["encoding"]))
	require.NoError(t, json.Unmarshal(p.Data, v))
}

func jsonPayload(t *testing.T, v any) payload {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: b}
}

// signalFromUI sends the request the UI's "Send a Signal" form sends.
func (c *uiClient) signalFromUI(id, name string, data any) {
	c.do(http.MethodPost, "/workflows/"+id+"/signal/"+name, map[string]any{
		"signalName":        name,
		"input":             map[string]any{"payloads": []payload{jsonPayload(c.t, data)}},
		"identity":          "web-ui",
		"workflowExecution": map[string]string{"workflowId": id},
	}, nil)
}

func TestRunsShowInTheWebUIAndItsSignalFormMovesThem(t *testing.T) {
	t.Parallel()
	in := downPastTheWindow(t, provider.Bird)
	ui := newUIClient(t)

	// The list a person opens: everything awaiting a decision.
	var list struct {
		Executions []struct {
			Execution struct {
				WorkflowID string `json:"workflowId"`
			} `json:"execution"`
			Status           string `json:"status"`
			SearchAttributes struct {
				IndexedFields map[string]payload `json:"indexedFields"`
			} `json:"searchAttributes"`
		} `json:"executions"`
	}
	query := url.QueryEscape(fmt.Sprintf(`SmsState="AwaitingDecision" AND SmsKey=%q`, in.Key))
	// Visibility follows the run's state a moment after the run's own
	// query (which awaitState read) shows it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		list.Executions = nil
		ui.do(http.MethodGet, "/workflows?query="+query, nil, &list)
		if len(list.Executions) > 0 || time.Now().After(deadline) {
			break
		}
	}
	require.Len(t, list.Executions, 1)
	row := list.Executions[0]
	require.Equal(t, in.Key, row.Execution.WorkflowID)
	require.Equal(t, "WORKFLOW_EXECUTION_STATUS_RUNNING", row.Status)
	for field, want := range map[string]string{"SmsState": "AwaitingDecision", "SmsProvider": "bird", "SmsKey": in.Key} {
		var got string
		row.SearchAttributes.IndexedFields[field].decode(t, &got)
		require.Equal(t, want, got, field)
	}

	// The run's page: its summary...
	var desc struct {
		ExecutionConfig struct {
			UserMetadata struct {
				Summary payload `json:"summary"`
			} `json:"userMetadata"`
		} `json:"executionConfig"`
	}
	ui.do(http.MethodGet, "/workflows/"+in.Key, nil, &desc)
	var summary string
	desc.ExecutionConfig.UserMetadata.Summary.decode(t, &summary)
	require.Equal(t, "SMS "+in.Key+" to +31…78 via bird", summary)

	// ...and its current details, which the UI reads through this query.
	details := func() string {
		var q struct {
			QueryResult struct {
				Payloads []struct {
					Data []byte `json:"data"`
				} `json:"payloads"`
			} `json:"queryResult"`
		}
		ui.do(http.MethodPost, "/workflows/"+in.Key+"/query/__temporal_workflow_metadata",
			map[string]any{"query": map[string]string{"queryType": "__temporal_workflow_metadata"}}, &q)
		var meta struct {
			CurrentDetails string `json:"currentDetails"`
		}
		require.NoError(t, json.Unmarshal(q.QueryResult.Payloads[0].Data, &meta))
		return meta.CurrentDetails
	}
	d := details()
	require.Contains(t, d, "**AwaitingDecision**")
	require.Contains(t, d, "signal `resend` or `cancel`")
	// Why, as downPastTheWindow allows it: the retries ran out, or a busy
	// worker reached the last attempt after the window had closed.
	require.True(t, strings.Contains(d, "ran out with the outcome unknown") || strings.Contains(d, "replay window of "+in.Key+" closed"), d)
	require.NotContains(t, d, "+31612345678", "the number is masked")

	// A malformed payload from the form is refused where a person sees it.
	ui.signalFromUI(in.Key, contract.SignalResend, map[string]string{"why": "?"})
	require.Eventually(t, func() bool { return bytes.Contains([]byte(details()), []byte("refused a resend signal")) }, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, contract.AwaitingDecision, status(t, in.Key).State)

	// The details show what to type, with the event's key; a decision
	// without the key and an id of its own is refused where a person sees
	// it, and the form filled in as shown moves the run.
	require.Contains(t, d, `"key": "`+in.Key+`"`)
	ui.signalFromUI(in.Key, contract.SignalResend, map[string]string{"reason": "customer called", "by": "carol"})
	require.Eventually(t, func() bool {
		return strings.Contains(details(), "a decision names the event it is for and carries an id of its own")
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, contract.AwaitingDecision, status(t, in.Key).State)
	ui.signalFromUI(in.Key, contract.SignalResend, map[string]string{"reason": "customer called", "by": "carol", "key": in.Key, "id": "ticket-17"})
	res, err := result(t, stack.Client.GetWorkflow(t.Context(), in.Key, ""))
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Len(t, messages(provider.Bird, in.Key+"~resend-1"), 1)
}

func TestCancelFromTheWebUIForm(t *testing.T) {
	t.Parallel()
	in := downPastTheWindow(t, provider.Sendy)
	newUIClient(t).signalFromUI(in.Key, contract.SignalCancel, map[string]string{"reason": "customer unsubscribed", "by": "dan", "key": in.Key, "id": "ticket-18"})
	res, err := result(t, stack.Client.GetWorkflow(t.Context(), in.Key, ""))
	require.Error(t, err)
	require.Equal(t, contract.Cancelled, res.State)
	require.Empty(t, messages(provider.Sendy, in.Key))
	require.Empty(t, messages(provider.Sendy, in.Key+"~resend-1"))
}
