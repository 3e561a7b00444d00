package handlers

import "net/http"

// Credential is the key r sends, read as the API reads it
// (Authorization: Bearer, or Basic's password), for listeners outside
// the API's engine that ask for the same keys: a worker's /metrics.
func Credential(r *http.Request) (string, bool) { return credential(r) }
