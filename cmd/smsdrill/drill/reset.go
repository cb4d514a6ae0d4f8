package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/cmd/smssim/simulator"
)

// resetRun resets the event's current run as an operator does from the
// web UI: to one of its completed workflow tasks (the one e.resetPoint
// draws), which starts a new run of the same workflow id. Kills may make
// the server or the worker unavailable meanwhile, so it tries for a
// while; what it did is kept in the event's outcome.
func (d *drill) resetRun(ctx context.Context, e *event) {
	var last error
	for try := 0; try < 20; try++ {
		if try > 0 {
			time.Sleep(time.Second)
		}
		runID, point, err := d.resetPoint(ctx, e)
		if err != nil {
			last = err
			continue
		}
		_, err = d.tc.WorkflowService().ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
			Namespace:                 client.DefaultNamespace,
			WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: e.key, RunId: runID},
			Reason:                    "fault drill: an operator resets the run",
			WorkflowTaskFinishEventId: point,
			RequestId:                 uuid.NewString(),
		})
		if err != nil {
			last = err
			continue
		}
		e.mu.Lock()
		e.out.Resets++
		e.mu.Unlock()
		return
	}
	d.logf("event %s: the run could not be reset: %v", e.key, last)
	e.mu.Lock()
	e.out.ResetError = last.Error()
	e.mu.Unlock()
}

// resetPoint reads the event's current run and picks the completed
// workflow task to reset it to.
func (d *drill) resetPoint(ctx context.Context, e *event) (runID string, point int64, err error) {
	desc, err := d.tc.DescribeWorkflowExecution(ctx, e.key, "")
	if err != nil {
		return "", 0, err
	}
	runID = desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	it := d.tc.GetWorkflowHistory(ctx, e.key, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var tasks []int64
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", 0, err
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			tasks = append(tasks, ev.GetEventId())
		}
	}
	if len(tasks) == 0 {
		return "", 0, fmt.Errorf("run %s of %s has completed no workflow task yet", runID, e.key)
	}
	return runID, tasks[min(int(e.resetPoint*float64(len(tasks))), len(tasks)-1)], nil
}

// unknownButUnsent finds, among the runs awaiting a decision, those that
// say their outcome is unknown although the simulator never received a
// send under any of their keys: a send that never left the task queue
// must not be called unknown.
func (d *drill) unknownButUnsent(ctx context.Context, awaiting []string) {
	for _, k := range awaiting {
		st, err := d.st.Status(ctx, k)
		if err != nil || !strings.HasPrefix(st.Reason, "the outcome is unknown") {
			continue
		}
		sent := false
		for _, key := range st.KeysUsed {
			n, err := d.sendsReceived(ctx, key)
			if err != nil || n > 0 {
				sent = true // a count that failed is no evidence
				break
			}
		}
		if !sent {
			e := d.byKey(k)
			e.mu.Lock()
			e.out.UnknownUnsent = true
			e.mu.Unlock()
			d.logf("event %s awaits a decision as unknown, but no send under %v ever reached the simulator: %s", k, st.KeysUsed, st.Reason)
		}
	}
}

// sendsReceived counts the send requests the simulator received under key.
func (d *drill) sendsReceived(ctx context.Context, key string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.simURL+"/_sim/requests?key="+url.QueryEscape(key), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Requests []simulator.Request `json:"requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	n := 0
	for _, r := range body.Requests {
		if r.Method == http.MethodPost {
			n++
		}
	}
	return n, nil
}
