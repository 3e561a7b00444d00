// Package tuning fills the zero fields of a package's Tuning (its timing
// constants, which tests shrink) from its defaults.
package tuning

import (
	"reflect"
	"time"
)

// WithDefaults is t with each zero time.Duration field, at any depth of
// nested structs, set to def's.
func WithDefaults[T any](t, def T) T {
	fill(reflect.ValueOf(&t).Elem(), reflect.ValueOf(def))
	return t
}

var durationType = reflect.TypeFor[time.Duration]()

func fill(v, def reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == durationType && f.Int() == 0:
			f.Set(def.Field(i))
		case f.Kind() == reflect.Struct:
			fill(f, def.Field(i))
		}
	}
}
