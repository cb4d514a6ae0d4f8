package app

import (
	"context"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
)

// DefaultLedgerRetention is the ledger's retention of personal fields
// when the namespace's cannot be read: Temporal's default, 30 days.
const DefaultLedgerRetention = 30 * 24 * time.Hour

// purgeEvery is how often the worker purges the ledger.
const purgeEvery = time.Hour

// ledgerRetention is --ledger-retention, or else the namespace's
// retention: the ledger keeps recipients and texts as long as Temporal
// keeps the runs that sent them, and no longer.
func (a *App) ledgerRetention(ctx context.Context) time.Duration {
	if a.Config.LedgerRetention > 0 {
		return a.Config.LedgerRetention
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ns, err := a.Client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: a.Namespace})
	if err == nil && ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() > 0 {
		return ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration()
	}
	a.Log.Warn("the namespace's retention could not be read: the ledger keeps personal fields for the default", zap.Duration("retention", DefaultLedgerRetention), zap.Error(err))
	return DefaultLedgerRetention
}

// purgeLedger removes, now and every hour until ctx ends, the personal
// fields of the events settled longer than retention ago, measured on
// the ledger's clock.
func (a *App) purgeLedger(ctx context.Context, retention time.Duration) {
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for {
		if now, err := a.Ledger.Now(ctx); err == nil {
			n, err := a.Ledger.Purge(ctx, now.Add(-retention))
			if n > 0 {
				a.Log.Info("purged the recipients and texts of settled events past the retention", zap.Int64("events", n), zap.Duration("retention", retention))
			}
			if err != nil && ctx.Err() == nil {
				a.Log.Warn("could not purge all of the ledger's personal fields; trying again in an hour", zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
