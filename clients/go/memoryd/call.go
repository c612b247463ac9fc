package memoryd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

var errNilRequest = errors.New("memoryd: nil request")

// CallTimeout is a call option setting the deadline of each attempt of this one call, in
// place of the client's (WithTimeout); 0 means none. c.ExportMemories(ctx, req,
// memoryd.CallTimeout(2*time.Minute)).
func CallTimeout(d time.Duration) grpc.CallOption { return callTimeout{d: d} }

// callTimeout rides along with the grpc call options; grpc ignores it (EmptyCallOption).
type callTimeout struct {
	grpc.EmptyCallOption
	d time.Duration
}

// NewIdempotencyKey returns a random (version 4) UUID for WriteRequest.IdempotencyKey.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// invoke runs one RPC with the client's token, trace context, deadline and retry policy.
func invoke[Req, Resp any](ctx context.Context, c *Client, method string, req Req,
	rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error), opts []grpc.CallOption) (Resp, error) {
	o := &c.opts
	timeout := o.timeout
	for _, opt := range opts {
		if ct, ok := opt.(callTimeout); ok {
			timeout = ct.d
		}
	}
	attempts := 1
	if mayRetry(method, req) {
		attempts = max(o.retry.MaxAttempts, 1)
	}
	ctx = withTraceContext(ctx, o.propagator)
	var zero Resp
	for attempt := 1; ; attempt++ {
		actx, err := c.withToken(ctx)
		if err != nil {
			return zero, err
		}
		cancel := context.CancelFunc(func() {})
		if timeout > 0 {
			actx, cancel = context.WithTimeout(actx, timeout)
		}
		var trailer metadata.MD
		resp, err := rpc(actx, req, append(opts[:len(opts):len(opts)], grpc.Trailer(&trailer))...) // never into the caller's array
		cancel()
		if err == nil {
			return resp, nil
		}
		failure := toError(err, trailer, attempt)
		var merr *Error
		if !errors.As(failure, &merr) || !retryableCode(merr.Code) || attempt >= attempts || ctx.Err() != nil {
			return zero, failure
		}
		// The server's RetryInfo delay, when longer, is waited instead of the backoff.
		wait := max(o.retry.Backoff(attempt), merr.RetryDelay)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
			return zero, failure // the caller's deadline would end the wait: stop now
		}
		if o.sleep(ctx, wait) != nil {
			return zero, failure
		}
	}
}

// withToken adds this attempt's bearer token to the outgoing metadata.
func (c *Client) withToken(ctx context.Context) (context.Context, error) {
	if c.opts.token == nil {
		return ctx, nil
	}
	token, err := c.opts.token(ctx)
	if err != nil {
		return nil, fmt.Errorf("memoryd: token provider: %w", err)
	}
	if token == "" {
		return ctx, nil
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), nil
}
