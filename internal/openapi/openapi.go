// Package openapi holds the OpenAPI 3 document of retryd's API, served at
// /openapi.json and kept true by a test that checks it against the routes
// and against real answers.
package openapi

import _ "embed"

// Document is the OpenAPI 3 document, as JSON.
//
//go:embed openapi.json
var Document []byte
