package facts_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

// TestCloneIsDeep changes every value a clone of a recorded host reaches
// (each map entry, slice element, pointee, string, number and bool) and
// checks that the original is unchanged. It catches a field that Clone
// shares with the original: a model of the host after a plan would then
// change the observed facts.
func TestCloneIsDeep(t *testing.T) {
	for _, name := range []string{"baseline", "size-shared"} {
		f := fixture.Facts(t, name)
		before, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		g := f.Clone()
		if got, _ := json.Marshal(g); string(got) != string(before) {
			t.Fatalf("%s: the clone differs from the original before any change", name)
		}
		n := mutate(reflect.ValueOf(g).Elem())
		if n < 1000 {
			t.Errorf("%s: only %d values changed: the walk misses most of the facts", name, n)
		}
		after, _ := json.Marshal(f)
		if string(after) != string(before) {
			t.Errorf("%s: changing the clone changed the original", name)
		}
		if got, _ := json.Marshal(g); string(got) == string(before) {
			t.Errorf("%s: the clone did not change", name)
		}
	}
}

// mutate changes every settable value v reaches through exported fields
// and returns how many it changed.
func mutate(v reflect.Value) int {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0
		}
		return mutate(v.Elem())
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				n += mutate(v.Field(i))
			}
		}
		return n
	case reflect.Slice, reflect.Array:
		n := 0
		for i := range v.Len() {
			n += mutate(v.Index(i))
		}
		return n
	case reflect.Map:
		n := 0
		it := v.MapRange()
		var keys, vals []reflect.Value
		for it.Next() {
			c := reflect.New(v.Type().Elem()).Elem()
			c.Set(it.Value())
			n += mutate(c)
			keys, vals = append(keys, it.Key()), append(vals, c)
		}
		for i := range keys {
			v.SetMapIndex(keys[i], vals[i])
		}
		return n
	case reflect.String:
		v.SetString(v.String() + "~")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	default:
		return 0
	}
	return 1
}
