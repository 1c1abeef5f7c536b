package api

import (
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/payments"
)

// authenticate lets through requests with a known API key, with the user
// set as the request's idempotency scope; every other request gets 401 and
// never reaches the key table.
func (h *handlers) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Values("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="paymentsd"`)
			writeProblem(w, ProblemUnauthorized, http.StatusUnauthorized, "Send your API key as Authorization: Bearer <api key>.")
			return
		}
		user, err := h.svc.Authenticate(r.Context(), token)
		switch {
		case errors.Is(err, payments.ErrUnauthorized):
			w.Header().Set("WWW-Authenticate", `Bearer realm="paymentsd", error="invalid_token"`)
			writeProblem(w, ProblemUnauthorized, http.StatusUnauthorized, "The API key is not known.")
			return
		case err != nil:
			h.log.ErrorContext(r.Context(), "authenticate", "err", err)
			writeProblem(w, ProblemUnavailable, http.StatusServiceUnavailable, "The database is unavailable; retry later.")
			return
		}
		next.ServeHTTP(w, r.WithContext(idem.WithScope(r.Context(), user)))
	})
}

// bearerToken reads an RFC 6750 bearer token from the Authorization
// header, which must appear once.
func bearerToken(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// userOf returns the authenticated user of a request.
func userOf(r *http.Request) string { return idem.ScopeFromContext(r.Context()) }

// requireJSON answers 415, storing nothing, unless the request says its
// body is JSON: the idem middleware fingerprints (and checks) a JSON body
// in its canonical form, and any other body as raw bytes.
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || (mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
			w.Header().Set("Accept-Post", "application/json")
			writeProblem(w, ProblemUnsupportedMediaType, http.StatusUnsupportedMediaType, "Send the body as JSON, with Content-Type: application/json.")
			return
		}
		next.ServeHTTP(w, r)
	})
}
