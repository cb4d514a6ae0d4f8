//go:build !race

package devstack

import (
	"context"
	"errors"
	"fmt"

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/acme/smsorch/contract"
)

func ensureNamespace(ctx context.Context, c client.Client, cfg Config) error {
	var desc *workflowservice.DescribeNamespaceResponse
	err := retry(ctx, func() error {
		var err error
		desc, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: cfg.Namespace})
		var notFound *serviceerror.NamespaceNotFound
		if errors.As(err, &notFound) {
			// A new database (PostgreSQL): register it; a server starting
			// beside this one may do the same.
			_, rerr := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
				Namespace:                        cfg.Namespace,
				Description:                      "SMS notifications (registered by smsorch)",
				WorkflowExecutionRetentionPeriod: durationpb.New(cfg.Retention),
			})
			var exists *serviceerror.NamespaceAlreadyExists
			if rerr != nil && !errors.As(rerr, &exists) {
				return fmt.Errorf("register namespace %s: %w", cfg.Namespace, rerr)
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("namespace %s is not available: %w", cfg.Namespace, err)
	}
	if desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() < cfg.Retention {
		_, err := c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
			Namespace: cfg.Namespace,
			Config:    &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(cfg.Retention)},
		})
		if err != nil {
			return fmt.Errorf("raise the retention of namespace %s to %s: %w", cfg.Namespace, cfg.Retention, err)
		}
	}
	// A namespace registered just now reaches the frontend's cache a few
	// seconds later; until then starts, polls and attribute changes in it fail.
	err = retry(ctx, func() error {
		_, err := c.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: cfg.Namespace})
		return err
	})
	if err != nil {
		return fmt.Errorf("namespace %s does not answer: %w", cfg.Namespace, err)
	}
	return contract.EnsureSearchAttributes(ctx, c, cfg.Namespace, cfg.SearchAttributes)
}
