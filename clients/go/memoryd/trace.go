package memoryd

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// The OpenTelemetry hook. Only the API is imported (otel's propagation package and otel/trace,
// no SDK, exporter or global state): the span is whatever the caller's tracer put in the
// context, so memoryd's server spans join the caller's trace whichever SDK the application uses.

// WithTracePropagator sets how trace context is written into each call's metadata. The default,
// propagation.TraceContext{}, sends W3C traceparent (and tracestate when set) whenever the
// context carries a valid span context, and nothing otherwise. Pass otel.GetTextMapPropagator()
// to use the application's global propagators (baggage, B3, ...), or nil to send none.
func WithTracePropagator(p propagation.TextMapPropagator) Option {
	return func(o *options) { o.propagator = p }
}

// metadataCarrier lets a propagator write into gRPC metadata.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// withTraceContext returns ctx with the span's trace context added to its outgoing metadata
// (replacing any traceparent already there), or ctx itself when no span is active.
func withTraceContext(ctx context.Context, p propagation.TextMapPropagator) context.Context {
	if p == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	p.Inject(ctx, metadataCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}
