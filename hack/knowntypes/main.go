// Command knowntypes writes gitops_ray/diff/knowntypes.json: for every type Argo CD's
// known-types normalizer registers (registered.go), the shape encoding/json gives it, so
// gitops-ray can re-marshal a custom resource's embedded Kubernetes types as Argo CD does
// (unknown fields dropped, omitempty/omitzero, quantities, times, durations canonical).
//
// Run from this directory: go run . > ../../gitops_ray/diff/knowntypes.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// special: the types with their own JSON methods, by what the Python side calls them.
var special = map[reflect.Type]string{
	reflect.TypeOf(resource.Quantity{}):    "quantity",
	reflect.TypeOf(metav1.Time{}):          "time",
	reflect.TypeOf(metav1.MicroTime{}):     "microtime",
	reflect.TypeOf(metav1.Duration{}):      "duration",
	reflect.TypeOf(intstr.IntOrString{}):   "intorstring",
	reflect.TypeOf(runtime.RawExtension{}): "raw",
	reflect.TypeOf(metav1.FieldsV1{}):      "raw",
}

var (
	marshaler   = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	unmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	structs     = map[string][][]any{}
)

func ref(t reflect.Type) any {
	if name, ok := special[t]; ok {
		return name
	}
	if t.Kind() != reflect.Pointer && (t.Implements(marshaler) ||
		reflect.PointerTo(t).Implements(unmarshaler)) {
		panic(fmt.Sprintf("%v has its own JSON methods: add it to special", t))
	}
	switch t.Kind() {
	case reflect.Pointer:
		return map[string]any{"ptr": ref(t.Elem())}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		return map[string]any{"list": ref(t.Elem())}
	case reflect.Map:
		return map[string]any{"map": ref(t.Elem())}
	case reflect.Struct:
		id := t.PkgPath() + "." + t.Name()
		if _, ok := structs[id]; !ok {
			structs[id] = nil // recursion guard
			structs[id] = fields(t)
		}
		return map[string]any{"struct": id}
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8,
		reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16,
		reflect.Uint32, reflect.Uint64:
		return t.Kind().String()
	}
	panic(fmt.Sprintf("unsupported kind %v of %v", t.Kind(), t))
}

// fields: [json name, omitempty, omitzero, ref] in declaration order, embedded structs
// without a name promoted (encoding/json's rule; ",inline" is not an option it knows).
func fields(t reflect.Type) [][]any {
	out := [][]any{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		parts := strings.Split(tag, ",")
		name, opts := parts[0], parts[1:]
		if f.Anonymous && name == "" {
			inner := f.Type
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				if _, ok := special[inner]; !ok {
					out = append(out, fields(inner)...)
					continue
				}
			}
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, []any{name, has(opts, "omitempty"), has(opts, "omitzero"), ref(f.Type)})
	}
	return out
}

func has(opts []string, want string) bool {
	for _, o := range opts {
		if o == want {
			return true
		}
	}
	return false
}

// golden re-marshals each {type, value} read from stdin as Argo CD's remarshal does.
func golden() {
	var samples []map[string]any
	if err := json.NewDecoder(os.Stdin).Decode(&samples); err != nil {
		panic(err)
	}
	for _, s := range samples {
		typed := reflect.New(reflect.TypeOf(registered[s["type"].(string)]).Elem()).Interface()
		out, err := remarshal(s["value"], typed)
		if err != nil {
			s["error"] = err.Error()
		} else {
			s["out"] = out
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(samples); err != nil {
		panic(err)
	}
}

// remarshal is knowntypes_normalizer.go's.
func remarshal(value any, typed any) (any, error) {
	data, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, typed); err != nil {
		return nil, err
	}
	if data, err = json.Marshal(typed); err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(data, &out)
	return out, err
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-golden" {
		golden()
		return
	}
	names := make([]string, 0, len(registered))
	for name := range registered {
		names = append(names, name)
	}
	sort.Strings(names)
	types := map[string]any{}
	for _, name := range names {
		types[name] = ref(reflect.TypeOf(registered[name]).Elem())
	}
	doc := map[string]any{"argocd": "v3.6.1", "types": types, "structs": structs}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(doc); err != nil {
		panic(err)
	}
}
