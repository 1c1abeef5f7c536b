// Package require is the assertion helpers of this repository's tests: the
// subset of testify's require that they use, with the same names and
// meaning, so that the library's modules depend on no test library. Each
// function stops the test at the first failed assertion (t.FailNow).
package require

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// T is what the helpers need of a *testing.T.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
}

func fail(t T, what string, msgAndArgs []any) {
	t.Helper()
	if m := message(msgAndArgs); m != "" {
		what += "\n\tmessage: " + m
	}
	t.Errorf("%s", what)
	t.FailNow()
}

func message(msgAndArgs []any) string {
	switch len(msgAndArgs) {
	case 0:
		return ""
	case 1:
		if s, ok := msgAndArgs[0].(string); ok {
			return s
		}
		return fmt.Sprintf("%+v", msgAndArgs[0])
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

// equal is testify's ObjectsAreEqual: byte slices by content, everything
// else by reflect.DeepEqual (so 1 and int32(1) differ).
func equal(expected, actual any) bool {
	if expected == nil || actual == nil {
		return expected == actual
	}
	eb, ok := expected.([]byte)
	if !ok {
		return reflect.DeepEqual(expected, actual)
	}
	ab, ok := actual.([]byte)
	if !ok {
		return false
	}
	if eb == nil || ab == nil {
		return eb == nil && ab == nil
	}
	return bytes.Equal(eb, ab)
}

func show(v any) string {
	if b, ok := v.([]byte); ok {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%#v", v)
}

func Equal(t T, expected, actual any, msgAndArgs ...any) {
	t.Helper()
	if !equal(expected, actual) {
		fail(t, fmt.Sprintf("not equal:\n\texpected: %s\n\tactual  : %s", show(expected), show(actual)), msgAndArgs)
	}
}

func NotEqual(t T, expected, actual any, msgAndArgs ...any) {
	t.Helper()
	if equal(expected, actual) {
		fail(t, fmt.Sprintf("should not be %s", show(actual)), msgAndArgs)
	}
}

func EqualError(t T, err error, want string, msgAndArgs ...any) {
	t.Helper()
	if err == nil || err.Error() != want {
		fail(t, fmt.Sprintf("error %v, want %q", err, want), msgAndArgs)
	}
}

func Same(t T, expected, actual any, msgAndArgs ...any) {
	t.Helper()
	ev, av := reflect.ValueOf(expected), reflect.ValueOf(actual)
	if ev.Kind() != reflect.Pointer || av.Kind() != reflect.Pointer || ev.Type() != av.Type() || ev.Pointer() != av.Pointer() {
		fail(t, fmt.Sprintf("not the same pointer: %p and %p", expected, actual), msgAndArgs)
	}
}

func IsType(t T, expected, actual any, msgAndArgs ...any) {
	t.Helper()
	if reflect.TypeOf(expected) != reflect.TypeOf(actual) {
		fail(t, fmt.Sprintf("type %T, want %T", actual, expected), msgAndArgs)
	}
}

func NoError(t T, err error, msgAndArgs ...any) {
	t.Helper()
	if err != nil {
		fail(t, fmt.Sprintf("unexpected error: %v", err), msgAndArgs)
	}
}

func Error(t T, err error, msgAndArgs ...any) {
	t.Helper()
	if err == nil {
		fail(t, "an error was expected", msgAndArgs)
	}
}

func ErrorIs(t T, err, target error, msgAndArgs ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		fail(t, fmt.Sprintf("error %v is not %v", err, target), msgAndArgs)
	}
}

func NotErrorIs(t T, err, target error, msgAndArgs ...any) {
	t.Helper()
	if errors.Is(err, target) {
		fail(t, fmt.Sprintf("error %v should not be %v", err, target), msgAndArgs)
	}
}

func ErrorAs(t T, err error, target any, msgAndArgs ...any) {
	t.Helper()
	if !errors.As(err, target) {
		fail(t, fmt.Sprintf("error %v is not a %T", err, target), msgAndArgs)
	}
}

func ErrorContains(t T, err error, sub string, msgAndArgs ...any) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		fail(t, fmt.Sprintf("error %v does not contain %q", err, sub), msgAndArgs)
	}
}

func True(t T, v bool, msgAndArgs ...any) {
	t.Helper()
	if !v {
		fail(t, "should be true", msgAndArgs)
	}
}

func False(t T, v bool, msgAndArgs ...any) {
	t.Helper()
	if v {
		fail(t, "should be false", msgAndArgs)
	}
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

func Nil(t T, v any, msgAndArgs ...any) {
	t.Helper()
	if !isNil(v) {
		fail(t, fmt.Sprintf("should be nil: %s", show(v)), msgAndArgs)
	}
}

func NotNil(t T, v any, msgAndArgs ...any) {
	t.Helper()
	if isNil(v) {
		fail(t, "should not be nil", msgAndArgs)
	}
}

func isZero(v any) bool { return v == nil || reflect.ValueOf(v).IsZero() }

func Zero(t T, v any, msgAndArgs ...any) {
	t.Helper()
	if !isZero(v) {
		fail(t, fmt.Sprintf("should be zero: %s", show(v)), msgAndArgs)
	}
}

// isEmpty is testify's: nil, a zero value, or a string, slice, map or
// channel of length zero, or a pointer to an empty value.
func isEmpty(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Chan, reflect.Map, reflect.Slice, reflect.String, reflect.Array:
		return rv.Len() == 0
	case reflect.Pointer:
		if rv.IsNil() {
			return true
		}
		return isEmpty(rv.Elem().Interface())
	}
	return rv.IsZero()
}

func Empty(t T, v any, msgAndArgs ...any) {
	t.Helper()
	if !isEmpty(v) {
		fail(t, fmt.Sprintf("should be empty: %s", show(v)), msgAndArgs)
	}
}

func NotEmpty(t T, v any, msgAndArgs ...any) {
	t.Helper()
	if isEmpty(v) {
		fail(t, "should not be empty", msgAndArgs)
	}
}

func Len(t T, v any, n int, msgAndArgs ...any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Chan, reflect.Map, reflect.Slice, reflect.String, reflect.Array:
		if rv.Len() == n {
			return
		}
		fail(t, fmt.Sprintf("length %d, want %d: %s", rv.Len(), n, show(v)), msgAndArgs)
	default:
		fail(t, fmt.Sprintf("%T has no length", v), msgAndArgs)
	}
}

// contains reports whether list (a string, slice, array or map's keys)
// holds elem (for a string: a substring).
func contains(list, elem any) (found, ok bool) {
	lv := reflect.ValueOf(list)
	switch lv.Kind() {
	case reflect.String:
		s, isStr := elem.(string)
		if !isStr {
			return false, false
		}
		return strings.Contains(lv.String(), s), true
	case reflect.Map:
		for _, k := range lv.MapKeys() {
			if equal(k.Interface(), elem) {
				return true, true
			}
		}
		return false, true
	case reflect.Slice, reflect.Array:
		for i := range lv.Len() {
			if equal(lv.Index(i).Interface(), elem) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

func Contains(t T, list, elem any, msgAndArgs ...any) {
	t.Helper()
	found, ok := contains(list, elem)
	if !ok || !found {
		fail(t, fmt.Sprintf("%s does not contain %s", show(list), show(elem)), msgAndArgs)
	}
}

func NotContains(t T, list, elem any, msgAndArgs ...any) {
	t.Helper()
	found, ok := contains(list, elem)
	if !ok || found {
		fail(t, fmt.Sprintf("%s should not contain %s", show(list), show(elem)), msgAndArgs)
	}
}

func ElementsMatch(t T, a, b any, msgAndArgs ...any) {
	t.Helper()
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	if isEmpty(a) && isEmpty(b) {
		return
	}
	if av.Kind() != reflect.Slice && av.Kind() != reflect.Array || bv.Kind() != reflect.Slice && bv.Kind() != reflect.Array || av.Len() != bv.Len() {
		fail(t, fmt.Sprintf("elements differ:\n\t%s\n\t%s", show(a), show(b)), msgAndArgs)
		return
	}
	used := make([]bool, bv.Len())
	for i := range av.Len() {
		found := false
		for j := range bv.Len() {
			if !used[j] && equal(av.Index(i).Interface(), bv.Index(j).Interface()) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			fail(t, fmt.Sprintf("elements differ:\n\t%s\n\t%s", show(a), show(b)), msgAndArgs)
			return
		}
	}
}

func JSONEq(t T, expected, actual string, msgAndArgs ...any) {
	t.Helper()
	var e, a any
	if err := json.Unmarshal([]byte(expected), &e); err != nil {
		fail(t, fmt.Sprintf("expected is not JSON: %v", err), msgAndArgs)
		return
	}
	if err := json.Unmarshal([]byte(actual), &a); err != nil {
		fail(t, fmt.Sprintf("actual is not JSON: %v: %s", err, actual), msgAndArgs)
		return
	}
	if !reflect.DeepEqual(e, a) {
		fail(t, fmt.Sprintf("JSON differs:\n\texpected: %s\n\tactual  : %s", expected, actual), msgAndArgs)
	}
}

// compiled is rx as a regexp: one already, or a pattern; nil otherwise.
func compiled(rx any) *regexp.Regexp {
	switch r := rx.(type) {
	case *regexp.Regexp:
		return r
	case string:
		return regexp.MustCompile(r)
	}
	return nil
}

func Regexp(t T, rx, s any, msgAndArgs ...any) {
	t.Helper()
	if re := compiled(rx); re == nil || !re.MatchString(fmt.Sprint(s)) {
		fail(t, fmt.Sprintf("%q does not match %v", s, rx), msgAndArgs)
	}
}

// number converts an ordered value to a float64 for comparison, or reports
// false.
func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// compare orders a and b, which must be of one type: -1, 0 or 1.
func compare(t T, a, b any, msgAndArgs []any) (int, bool) {
	t.Helper()
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		fail(t, fmt.Sprintf("cannot compare %T with %T", a, b), msgAndArgs)
		return 0, false
	}
	if at, ok := a.(time.Time); ok {
		return at.Compare(b.(time.Time)), true
	}
	if as, ok := a.(string); ok {
		return strings.Compare(as, b.(string)), true
	}
	x, ok1 := number(a)
	y, ok2 := number(b)
	if !ok1 || !ok2 {
		fail(t, fmt.Sprintf("cannot order %T", a), msgAndArgs)
		return 0, false
	}
	switch {
	case x < y:
		return -1, true
	case x > y:
		return 1, true
	}
	return 0, true
}

func order(t T, a, b any, ok func(int) bool, rel string, msgAndArgs []any) {
	t.Helper()
	c, comparable := compare(t, a, b, msgAndArgs)
	if comparable && !ok(c) {
		fail(t, fmt.Sprintf("%v is not %s %v", a, rel, b), msgAndArgs)
	}
}

func Greater(t T, a, b any, msgAndArgs ...any) {
	t.Helper()
	order(t, a, b, func(c int) bool { return c > 0 }, ">", msgAndArgs)
}

func GreaterOrEqual(t T, a, b any, msgAndArgs ...any) {
	t.Helper()
	order(t, a, b, func(c int) bool { return c >= 0 }, ">=", msgAndArgs)
}

func Less(t T, a, b any, msgAndArgs ...any) {
	t.Helper()
	order(t, a, b, func(c int) bool { return c < 0 }, "<", msgAndArgs)
}

func LessOrEqual(t T, a, b any, msgAndArgs ...any) {
	t.Helper()
	order(t, a, b, func(c int) bool { return c <= 0 }, "<=", msgAndArgs)
}

func Positive(t T, v any, msgAndArgs ...any) {
	t.Helper()
	if x, ok := number(v); !ok || x <= 0 {
		fail(t, fmt.Sprintf("%v is not positive", v), msgAndArgs)
	}
}

func WithinDuration(t T, expected, actual time.Time, delta time.Duration, msgAndArgs ...any) {
	t.Helper()
	if d := actual.Sub(expected); d < -delta || d > delta {
		fail(t, fmt.Sprintf("%v and %v are %v apart, more than %v", expected, actual, d, delta), msgAndArgs)
	}
}

func NotPanics(t T, f func(), msgAndArgs ...any) {
	t.Helper()
	var p any
	func() {
		defer func() { p = recover() }()
		f()
	}()
	if p != nil {
		fail(t, fmt.Sprintf("panicked: %v", p), msgAndArgs)
	}
}

func FileExists(t T, path string, msgAndArgs ...any) {
	t.Helper()
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		fail(t, fmt.Sprintf("no file at %s", path), msgAndArgs)
	}
}

// Eventually calls cond every tick until it returns true, failing if it has
// not by waitFor. (The tests use it only to wait for a state with a
// generous bound.)
func Eventually(t T, cond func() bool, waitFor, tick time.Duration, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			fail(t, fmt.Sprintf("condition not met within %v", waitFor), msgAndArgs)
			return
		}
		time.Sleep(tick)
	}
}

// InDelta asserts that two numbers differ by at most delta.
func InDelta(t T, expected, actual any, delta float64, msgAndArgs ...any) {
	t.Helper()
	x, ok1 := number(expected)
	y, ok2 := number(actual)
	if !ok1 || !ok2 || x-y > delta || y-x > delta {
		fail(t, fmt.Sprintf("%v and %v differ by more than %v", expected, actual, delta), msgAndArgs)
	}
}

// NotRegexp asserts that s does not match rx.
func NotRegexp(t T, rx, s any, msgAndArgs ...any) {
	t.Helper()
	if re := compiled(rx); re == nil || re.MatchString(fmt.Sprint(s)) {
		fail(t, fmt.Sprintf("%q matches %v", s, rx), msgAndArgs)
	}
}

// NoFileExists asserts that nothing exists at path.
func NoFileExists(t T, path string, msgAndArgs ...any) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		fail(t, fmt.Sprintf("%s exists (or cannot be checked: %v)", path, err), msgAndArgs)
	}
}
