package record

import (
	"encoding/json"
	"net"
	"net/url"
	"strings"

	"github.com/retryd/retryd/internal/jsonobj"
)

// spec is what the client sent: immutable, and stored as one JSON string
// next to the hash.
type spec struct {
	URL            string            `json:"u"`
	Method         string            `json:"m"`
	Headers        map[string]string `json:"h,omitempty"`
	Body           string            `json:"b,omitempty"`
	IdempotencyKey string            `json:"k,omitempty"`
	CallbackURL    string            `json:"c,omitempty"`
	Dialect        string            `json:"d,omitempty"`
	QStash         *QStash           `json:"q,omitempty"`
	FlowControl    *FlowControl      `json:"fc,omitempty"`
	Topic          string            `json:"t,omitempty"`
	Publication    string            `json:"p,omitempty"`
	TraceParent    string            `json:"tp,omitempty"`
	ResentFrom     *ResentFrom       `json:"rf,omitempty"`
	Credential     string            `json:"cr,omitempty"`
	Proxy          string            `json:"px,omitempty"`
}

// spec encodes r's spec.
func (r *Request) spec() string {
	b, _ := json.Marshal(spec{URL: r.URL, Method: r.Method, Headers: r.Headers, Body: r.Body,
		IdempotencyKey: r.IdempotencyKey, CallbackURL: r.CallbackURL, Dialect: r.Dialect, QStash: r.QStash,
		FlowControl: r.FlowControl, Topic: r.Topic, Publication: r.Publication, TraceParent: r.TraceParent, ResentFrom: r.ResentFrom,
		Credential: r.Credential, Proxy: r.Proxy})
	return string(b)
}

// specFrom decodes a spec JSON, which every attempt's begin reads: in one
// walk (jsonobj), a string without escapes taken as it is, rather than
// encoding/json's scan, decode and copy of each member. A spec that walk
// leaves (a member of another name or shape) goes through json.Unmarshal
// whole, as it always did; a spec that is not JSON decodes to what
// json.Unmarshal leaves.
func specFrom(specJSON string) spec {
	raw := []byte(specJSON)
	if sp, ok := specMembers(raw); ok {
		return sp
	}
	var sp spec
	_ = json.Unmarshal(raw, &sp)
	return sp
}

// specMembers decodes raw member by member; ok is false when a member is
// not one spec has, or does not decode as its field's type.
func specMembers(raw []byte) (sp spec, ok bool) {
	f, ok := jsonobj.Members(raw)
	if !ok {
		return spec{}, false
	}
	for name, v := range f {
		var dst any
		switch name {
		case "u":
			dst = &sp.URL
		case "m":
			dst = &sp.Method
		case "b":
			dst = &sp.Body
		case "k":
			dst = &sp.IdempotencyKey
		case "c":
			dst = &sp.CallbackURL
		case "d":
			dst = &sp.Dialect
		case "t":
			dst = &sp.Topic
		case "p":
			dst = &sp.Publication
		case "tp":
			dst = &sp.TraceParent
		case "cr":
			dst = &sp.Credential
		case "px":
			dst = &sp.Proxy
		case "h":
			if sp.Headers, ok = jsonobj.PlainStrings(v); ok {
				continue
			}
			dst = &sp.Headers
		case "q":
			dst = &sp.QStash
		case "fc":
			dst = &sp.FlowControl
		case "rf":
			dst = &sp.ResentFrom
		default:
			return spec{}, false
		}
		if s, ok := dst.(*string); ok {
			if *s, ok = jsonobj.PlainString(v); ok {
				continue
			}
		}
		if json.Unmarshal(v, dst) != nil {
			return spec{}, false
		}
	}
	return sp, true
}

// place is a URL taken apart: a worker asks a request's host:port,
// endpoint and flow key several times an attempt, so a record read from
// Redis keeps its URL's (Request.at) rather than parse it each time.
type place struct {
	url    string
	parsed bool
	// host is the lower-case host name; hostPort adds the port (from the
	// scheme when the URL has none); endpoint is scheme://host:port, ""
	// without a scheme. All "" when the URL does not parse.
	host, hostPort, endpoint string
}

func placeOf(raw string) place {
	p := place{url: raw, parsed: true}
	u, err := url.Parse(raw)
	if err != nil {
		return p
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p.host = strings.ToLower(u.Hostname())
	p.hostPort = strings.ToLower(net.JoinHostPort(u.Hostname(), port))
	if u.Scheme != "" {
		p.endpoint = strings.ToLower(u.Scheme) + "://" + p.hostPort
	}
	return p
}

// place is r's URL taken apart: the one kept when r was read, unless its
// URL has changed since.
func (r *Request) place() place {
	if r.at.parsed && r.at.url == r.URL {
		return r.at
	}
	return placeOf(r.URL)
}

// hostOf is the lower-case host name of a URL, without port (placeOf's
// host, without the rest: lists and indexes ask only for it).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// hostPortOf is the lower-case host:port of a URL, the port made explicit
// from the scheme when the URL has none.
func hostPortOf(raw string) string { return placeOf(raw).hostPort }
