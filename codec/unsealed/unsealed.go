// Package unsealed names the mark a worker outside dev mode puts on a
// payload that reached it without the seal of one of its keys (see
// codec.ApplyRefusingUnsealed), for readers that only compare what such a
// payload says and never act on it. It depends on nothing of ours, so
// the starter, which applications link, can use it.
package unsealed

import (
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// Encoding replaces the encoding of a marked payload: no converter reads
// it, so a decoder that tries says why.
const Encoding = "unsealed (outside dev mode the worker takes only payloads sealed with its keys: send through smsorch, or through the temporal CLI or web UI with the codec server)"

// MetadataPlainEncoding keeps the marked payload's own encoding.
const MetadataPlainEncoding = "smsorch-unsealed-encoding"

// MetadataUnopened, on a marked payload that claimed to be sealed, says
// why it did not open here (a key id the ring lacks, or bytes that do
// not open under the key they name).
const MetadataUnopened = "smsorch-unopened"

// Is reports whether p was marked.
func Is(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[converter.MetadataEncoding]) == Encoding
}

// Mark returns a marked copy of p.
func Mark(p *commonpb.Payload) *commonpb.Payload {
	md := make(map[string][]byte, len(p.GetMetadata())+1)
	for k, v := range p.GetMetadata() {
		if k != MetadataUnopened { // only MarkUnopened says a payload did not open
			md[k] = v
		}
	}
	md[MetadataPlainEncoding] = p.GetMetadata()[converter.MetadataEncoding]
	md[converter.MetadataEncoding] = []byte(Encoding)
	return &commonpb.Payload{Metadata: md, Data: p.GetData()}
}

// MarkUnopened returns a marked copy of p, a payload that claimed to be
// sealed, saying why it did not open.
func MarkUnopened(p *commonpb.Payload, why string) *commonpb.Payload {
	m := Mark(p)
	m.Metadata[MetadataUnopened] = []byte(why)
	return m
}

// Unopened is why a marked payload that claimed to be sealed did not
// open, or "" for one that arrived in plain.
func Unopened(p *commonpb.Payload) string {
	if !Is(p) {
		return ""
	}
	return string(p.GetMetadata()[MetadataUnopened])
}

// Restored is p as it arrived, when it was marked.
func Restored(p *commonpb.Payload) *commonpb.Payload {
	if !Is(p) {
		return p
	}
	md := make(map[string][]byte, len(p.GetMetadata()))
	for k, v := range p.GetMetadata() {
		if k != MetadataPlainEncoding && k != MetadataUnopened {
			md[k] = v
		}
	}
	md[converter.MetadataEncoding] = p.GetMetadata()[MetadataPlainEncoding]
	return &commonpb.Payload{Metadata: md, Data: p.GetData()}
}
