// Command sdkstandin answers, on loopback, for the public destinations the
// official QStash SDK's test suite sends messages to (example.com,
// httpbin.org, mock.httpstatus.io, …), over HTTPS with a CA it makes and
// writes to -ca. It is run by e2e/sdk-suite.sh inside a network namespace
// that has only loopback, so the suite reaches nothing outside the machine.
//
// Answers: /status/NNN (httpbin) and /NNN (mock.httpstatus.io) answer NNN,
// after ?sleep=ms when asked; example.com answers 404 but for / (the
// suite's "any broken link will work"); everything else answers 200 with
// what it got. mock.httpstatus.io's body is its own, "404 Not Found": the
// Python suite compares DLQ entries' responseBody with it.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/retryd/retryd/internal/testca"
)

var status = regexp.MustCompile(`^/(?:status/)?([1-5][0-9][0-9])$`)

func main() {
	addr := flag.String("addr", "127.0.0.1:443", "HTTPS address")
	plain := flag.String("http", "127.0.0.1:80", "HTTP address")
	caFile := flag.String("ca", "standin-ca.pem", "where to write the CA certificate")
	names := flag.String("names", "", "comma-separated host names the certificate covers")
	flag.Parse()
	cert, caPEM, err := issue(strings.Split(*names, ","))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*caFile, caPEM, 0o644); err != nil {
		log.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if ms, err := strconv.Atoi(r.URL.Query().Get("sleep")); err == nil && ms > 0 {
			select {
			case <-time.After(time.Duration(min(ms, 60000)) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		code := http.StatusOK
		if m := status.FindStringSubmatch(r.URL.Path); m != nil {
			code, _ = strconv.Atoi(m[1])
		} else if strings.HasPrefix(r.Host, "example.com") && r.URL.Path != "/" {
			// The suite's "broken link": example.com has no page but /.
			code = http.StatusNotFound
		}
		if strings.HasPrefix(r.Host, "mock.httpstatus.io") {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(code)
			fmt.Fprintf(w, "%d %s", code, http.StatusText(code))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"host":%q,"path":%q,"method":%q,"bytes":%d}`, r.Host, r.URL.Path, r.Method, len(body))
	})
	go func() { log.Fatal(http.ListenAndServe(*plain, h)) }()
	srv := &http.Server{Addr: *addr, Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServeTLS("", ""))
}

// issue makes a throwaway CA and a certificate for names signed by it.
func issue(names []string) (tls.Certificate, []byte, error) {
	issued, err := testca.Issue(names...)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(append(issued.Cert, issued.CA...), issued.Key)
	return cert, issued.CA, err
}
