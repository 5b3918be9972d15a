// Package deepcopy copies values with everything they reach: maps, slices,
// pointers and interfaces are copied, not shared, so that changing the copy
// never changes the original. It is what facts.Facts.Clone and
// engine.Instance.Clone are built on: by reflection, a field added to the
// facts later is copied too without anyone remembering to.
//
// Unexported fields are copied as they are (shallow): reflection may not
// set them one by one. The types it is used on keep only immutable values
// there (strings, a stateless profile, a read claim) or say otherwise.
package deepcopy

import "reflect"

// Of returns a deep copy of v. Two pointers (or maps) to the same value in v
// point to the same copy: sharing within v is kept, sharing with v is not.
func Of[T any](v T) T {
	c := copier{seen: map[ref]reflect.Value{}}
	src := reflect.ValueOf(&v).Elem()
	dst := reflect.New(src.Type()).Elem()
	c.into(dst, src)
	return dst.Interface().(T)
}

// ref identifies a pointer or map already copied.
type ref struct {
	typ reflect.Type
	ptr uintptr
}

type copier struct{ seen map[ref]reflect.Value }

// into sets dst (settable, of src's type) to a deep copy of src.
func (c copier) into(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		c.pointer(dst, src)
	case reflect.Map:
		c.mapOf(dst, src)
	case reflect.Slice:
		c.slice(dst, src)
	case reflect.Array:
		for i := range src.Len() {
			c.into(dst.Index(i), src.Index(i))
		}
	case reflect.Struct:
		c.structOf(dst, src)
	case reflect.Interface:
		c.iface(dst, src)
	default:
		// Values (numbers, strings, bools) and what cannot be copied
		// (funcs, channels) are assigned.
		dst.Set(src)
	}
}

func (c copier) pointer(dst, src reflect.Value) {
	if src.IsNil() {
		return
	}
	k := ref{src.Type(), src.Pointer()}
	if p, ok := c.seen[k]; ok {
		dst.Set(p)
		return
	}
	p := reflect.New(src.Type().Elem())
	c.seen[k] = p
	c.into(p.Elem(), src.Elem())
	dst.Set(p)
}

func (c copier) mapOf(dst, src reflect.Value) {
	if src.IsNil() {
		return
	}
	k := ref{src.Type(), src.Pointer()}
	if m, ok := c.seen[k]; ok {
		dst.Set(m)
		return
	}
	m := reflect.MakeMapWithSize(src.Type(), src.Len())
	c.seen[k] = m
	it := src.MapRange()
	for it.Next() {
		key := reflect.New(src.Type().Key()).Elem()
		c.into(key, it.Key())
		val := reflect.New(src.Type().Elem()).Elem()
		c.into(val, it.Value())
		m.SetMapIndex(key, val)
	}
	dst.Set(m)
}

func (c copier) slice(dst, src reflect.Value) {
	if src.IsNil() {
		return
	}
	s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
	for i := range src.Len() {
		c.into(s.Index(i), src.Index(i))
	}
	dst.Set(s)
}

// structOf assigns the whole struct first (its unexported fields, shallow),
// then replaces each exported field with its deep copy.
func (c copier) structOf(dst, src reflect.Value) {
	dst.Set(src)
	t := src.Type()
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			c.into(dst.Field(i), src.Field(i))
		}
	}
}

func (c copier) iface(dst, src reflect.Value) {
	if src.IsNil() {
		return
	}
	e := src.Elem()
	v := reflect.New(e.Type()).Elem()
	c.into(v, e)
	dst.Set(v)
}
