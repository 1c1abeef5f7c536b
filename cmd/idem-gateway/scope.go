package main

import "strings"

// authSchemes are the HTTP authentication schemes of IANA's registry, as
// spelt there: the spelling an Authorization value's scheme is hashed in,
// so that a client that sends the registered spelling keeps its scope.
var authSchemes = []string{
	"Basic", "Bearer", "Concealed", "Digest", "DPoP", "GNAP", "HOBA", "Mutual",
	"Negotiate", "OAuth", "PrivateToken", "SCRAM-SHA-1", "SCRAM-SHA-256", "vapid",
}

// canonicalAuthorization is an Authorization value with its scheme in one
// spelling (auth-schemes are case-insensitive, RFC 9110 §11.1) and one
// space before the credentials, which stay as sent. A value without
// credentials after a scheme is returned as is: it may be a bare token,
// whose case matters.
func canonicalAuthorization(v string) string {
	i := strings.IndexAny(v, " \t")
	if i <= 0 {
		return v
	}
	scheme, creds := v[:i], strings.TrimLeft(v[i:], " \t")
	canon := ""
	for _, s := range authSchemes {
		if strings.EqualFold(scheme, s) {
			canon = s
			break
		}
	}
	if canon == "" {
		canon = titleASCII(scheme)
	}
	if canon == scheme && v[i] == ' ' && len(v)-len(creds) == i+1 {
		return v // the common case: no allocation
	}
	return canon + " " + creds
}

// titleASCII is s with its first letter upper-case and the rest lower,
// ASCII letters only: an unregistered scheme's one spelling.
func titleASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case i == 0 && 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case i > 0 && 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// credentialHeader reports whether a header's value is a credential a
// client cannot guess, so its hash may scope keys: Authorization. Any
// other header must be declared (scope.credential_header) or trusted
// (scope.trusted_header).
func credentialHeader(name string) bool {
	return strings.EqualFold(name, "Authorization")
}
