package httpapi

import _ "embed"

// openAPIDocument is the OpenAPI 3.1 description of the routes, served at
// /openapi.json. A test validates real requests and responses of every
// route against it.
//
//go:embed openapi.json
var openAPIDocument []byte
