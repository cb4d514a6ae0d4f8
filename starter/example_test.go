package starter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/starter"
)

// Start the SMS of an "order shipped" event from application code. Run it
// as often as the event arrives: one run, one SMS.
func ExampleStarter_Send() {
	c, err := client.Dial(client.Options{}) // TEMPORAL_ADDRESS etc., or 127.0.0.1:7233
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s := starter.New(c)

	res, err := s.Send(context.Background(), starter.Event{
		Kind: "order", ID: "58213", Stage: "shipped", // key: order-58213-shipped
		To: "+31612345678", Text: "Order 58213 has shipped.", Provider: "bird",
	})
	var invalid *starter.InvalidError
	switch {
	case errors.As(err, &invalid):
		log.Fatalf("fix %s: %v", invalid.Field, err) // nothing was started
	case errors.Is(err, starter.ErrConflict):
		log.Fatal(err) // the key already belongs to another message
	case err != nil:
		log.Fatal(err) // Temporal unreachable: retrying is safe
	}
	fmt.Println(res.Key, res.Started, res.State)
}

// Decide on a run awaiting a decision. Decide answers at once and refuses a
// decision that does not fit; Signal queues the plain signal instead.
func ExampleStarter_Decide() {
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ack, err := starter.New(c).Decide(context.Background(), "order-58213-shipped",
		contract.Decision{Action: contract.ActionResend, Reason: "customer says nothing arrived", By: "alice"})
	if err != nil {
		log.Fatal(err) // e.g. "refused: the run is Accepted, not awaiting a decision"
	}
	fmt.Println(ack.Message)
}

// Check an event without a Temporal client: what Send checks before it
// starts anything. The key comes from the business event; the text's
// encoding and segments are what the network will carry.
func ExampleValidate() {
	plan, err := starter.Validate(starter.Event{
		Kind: "order", ID: "58213", Stage: "shipped",
		To: "+31 6 1234 5678", Text: "Order 58213 has shipped.", Provider: "bird",
	}, time.Now())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(plan.Key, plan.Input.To, plan.Text.Encoding, plan.Text.Segments)

	_, err = starter.Validate(starter.Event{
		Kind: "order", ID: "58213", Stage: "shipped",
		To: "0612345678", Text: "Order 58213 has shipped.", Provider: "bird",
	}, time.Now())
	var invalid *starter.InvalidError
	if errors.As(err, &invalid) {
		fmt.Println("fix", invalid.Field)
	}
	// Output:
	// order-58213-shipped +31612345678 GSM-7 1
	// fix to
}
