// Command argodiff times Argo CD's own diff on the objects and ignore rules that
// gitops-ray's diff benchmark uses, so the two can be compared in the same run.
//
// It reads one JSON document (path as the only argument, "-" for stdin):
//
//	{"rounds": 5,
//	 "rules": [ResourceIgnoreDifferences, ...],          // the Application's ignoreDifferences
//	 "overrides": {"*/*": {"jsonPointers": ["/status"]}}, // argocd-cm system-level rules
//	 "cases": [{"desired": {...}, "predicted": {...}, "live": {...}}, ...]}
//
// and prints one JSON result. The ignore rules go through argo-cd's own
// util/argo/normalizers.NewIgnoreNormalizer (gojq del(expr), RFC 6902 remove), built once per
// round as Argo CD builds it once per app comparison. Two gitops-engine modes are timed:
//
//   - "legacy": diff.Diff(desired, live), Argo CD's default (two-way diff for a live object
//     without last-applied, which is what server-side apply leaves);
//   - "server-side": diff.Diff with WithServerSideDiff, where the dry-run apply returns the
//     precomputed "predicted" object instead of calling an API server, so only the diff
//     itself is timed. Webhook-mutation removal is off: it needs the cluster's OpenAPI
//     schema, and nothing mutates RayClusters here.
//
// Input modes ("mode"):
//
//   - "dicts" (default): the cases are decoded and the dry-run answers marshalled before
//     the clock starts, so only diff.Diff is timed (diff.Diff itself marshals and
//     unmarshals internally, and returns NormalizedLive/PredictedLive as JSON bytes);
//   - "bytes": "files" names three files of compact JSON, one object per line (line i of
//     each is case i): desired, the dry-run answer and live, as the API server sends them.
//     Timed per object: desired and live unmarshalled into unstructured objects
//     (Unstructured.UnmarshalJSON, what client-go does), diff.Diff (whose server-side dry
//     run returns the dry-run answer's bytes, which diff.Diff unmarshals itself), then an
//     RFC 6902 JSON Patch from NormalizedLive to PredictedLive
//     (gomodules.xyz/jsonpatch/v2.CreatePatch, the patch library argo-cd depends on)
//     marshalled to bytes. "patch": "modified" (default) patches the objects found
//     modified and emits "[]" for the others; "all" patches every object.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	"github.com/argoproj/gitops-engine/pkg/diff"
	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type input struct {
	Rounds int    `json:"rounds"`
	Mode   string `json:"mode"`  // "dicts" (default) or "bytes"
	Patch  string `json:"patch"` // bytes mode: "modified" (default) or "all"
	Files  struct {
		Desired   string `json:"desired"`
		Predicted string `json:"predicted"`
		Live      string `json:"live"`
	} `json:"files"`
	Rules     []v1alpha1.ResourceIgnoreDifferences   `json:"rules"`
	Overrides map[string]v1alpha1.OverrideIgnoreDiff `json:"overrides"`
	Cases     []struct {
		Desired   map[string]any `json:"desired"`
		Predicted map[string]any `json:"predicted"`
		Live      map[string]any `json:"live"`
	} `json:"cases"`
}

type objects struct {
	desired, live []*unstructured.Unstructured
	predicted     []string // the dry-run answers, as the API server would send them
	keys          []string // namespace/name of each case

	// bytes mode: the compact JSON of each case, as read from the files
	rawDesired, rawLive [][]byte
	bytesMode           bool
	patchAll            bool
}

type modeResult struct {
	Seconds          []float64 `json:"seconds"`
	ObjectsPerSecond float64   `json:"objects_per_second"`
	PerObjectP50us   float64   `json:"per_object_p50_us"`
	PerObjectP99us   float64   `json:"per_object_p99_us"`
	Modified         []int     `json:"modified"`
	Errors           int       `json:"errors"`
	// bytes mode: total bytes of the serialised patches (last round) and the patch of
	// each modified object (index -> JSON text), so the run can compare them with ours
	PatchBytes int            `json:"patch_bytes,omitempty"`
	Patches    map[int]string `json:"patches,omitempty"`
}

// cannedDryRun answers gitops-engine's server-side dry run with the precomputed object.
type cannedDryRun map[string]string

func (c cannedDryRun) Run(_ context.Context, obj *unstructured.Unstructured, _ string) (string, error) {
	answer, ok := c[obj.GetNamespace()+"/"+obj.GetName()]
	if !ok {
		return "", fmt.Errorf("no predicted object for %s/%s", obj.GetNamespace(), obj.GetName())
	}
	return answer, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argodiff INPUT.json (or - for stdin)")
		os.Exit(2)
	}
	in, err := readInput(os.Args[1])
	if err != nil {
		fail(err)
	}
	objs, err := decode(in)
	if err != nil {
		fail(err)
	}
	if path := os.Getenv("ARGODIFF_CPUPROFILE"); path != "" {
		stop, err := profile(path)
		if err != nil {
			fail(err)
		}
		defer stop()
	}
	overrides := make(map[string]v1alpha1.ResourceOverride, len(in.Overrides))
	for key, ignore := range in.Overrides {
		overrides[key] = v1alpha1.ResourceOverride{IgnoreDifferences: ignore}
	}
	dryRun := cannedDryRun{}
	for i, key := range objs.keys {
		dryRun[key] = objs.predicted[i]
	}
	modes := map[string]modeResult{}
	for _, mode := range []string{"legacy", "server-side"} {
		extra := []diff.Option{}
		if mode == "server-side" {
			extra = append(extra, diff.WithServerSideDiff(true), diff.WithServerSideDryRunner(dryRun),
				diff.WithIgnoreMutationWebhook(false), diff.WithManager("argocd-controller"))
		}
		res, err := bench(objs, in, overrides, extra)
		if err != nil {
			fail(fmt.Errorf("%s: %w", mode, err))
		}
		modes[mode] = res
	}
	out := map[string]any{
		"implementation": "gitops-engine",
		"versions":       versions(),
		"go":             runtime.Version(),
		"objects":        len(objs.keys),
		"rounds":         in.Rounds,
		"mode":           in.Mode,
		"modes":          modes,
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

func readInput(path string) (*input, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	in := &input{}
	if err := json.NewDecoder(r).Decode(in); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if in.Rounds < 1 {
		in.Rounds = 1
	}
	if in.Mode == "" {
		in.Mode = "dicts"
	}
	if in.Patch == "" {
		in.Patch = "modified"
	}
	if in.Mode != "dicts" && in.Mode != "bytes" {
		return nil, fmt.Errorf("mode %q: want dicts or bytes", in.Mode)
	}
	if in.Patch != "modified" && in.Patch != "all" {
		return nil, fmt.Errorf("patch %q: want modified or all", in.Patch)
	}
	return in, nil
}

// decode turns the cases into what Argo CD holds before it diffs: unstructured objects
// for desired (from the repo server) and live (from the cluster cache), JSON text for the
// dry-run answer. This is not timed.
func decode(in *input) (*objects, error) {
	if in.Mode == "bytes" {
		return readLines(in)
	}
	objs := &objects{}
	for i, c := range in.Cases {
		predicted, err := json.Marshal(c.Predicted)
		if err != nil {
			return nil, fmt.Errorf("case %d: %w", i, err)
		}
		objs.desired = append(objs.desired, &unstructured.Unstructured{Object: c.Desired})
		objs.live = append(objs.live, &unstructured.Unstructured{Object: c.Live})
		objs.predicted = append(objs.predicted, string(predicted))
		objs.keys = append(objs.keys, objs.desired[i].GetNamespace()+"/"+objs.desired[i].GetName())
	}
	return objs, nil
}

// readLines loads the bytes mode's files. Untimed: the split into lines, the dry-run
// answers as strings (what the canned dry run returns) and each case's namespace/name.
func readLines(in *input) (*objects, error) {
	objs := &objects{bytesMode: true, patchAll: in.Patch == "all"}
	var sides [3][][]byte
	for s, path := range []string{in.Files.Desired, in.Files.Predicted, in.Files.Live} {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		sides[s] = bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	}
	if len(sides[1]) != len(sides[0]) || len(sides[2]) != len(sides[0]) {
		return nil, fmt.Errorf("files differ in length: %d, %d, %d lines",
			len(sides[0]), len(sides[1]), len(sides[2]))
	}
	objs.rawDesired, objs.rawLive = sides[0], sides[2]
	for i, line := range sides[0] {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(line); err != nil {
			return nil, fmt.Errorf("desired line %d: %w", i+1, err)
		}
		objs.keys = append(objs.keys, u.GetNamespace()+"/"+u.GetName())
		objs.predicted = append(objs.predicted, string(sides[1][i]))
	}
	return objs, nil
}

func bench(objs *objects, in *input, overrides map[string]v1alpha1.ResourceOverride, extra []diff.Option) (modeResult, error) {
	res := modeResult{}
	var perObject []float64
	for round := 0; round < in.Rounds; round++ {
		start := time.Now()
		modified, errs, took, patches, err := diffAll(objs, in.Rules, overrides, extra)
		if err != nil {
			return res, err
		}
		res.Seconds = append(res.Seconds, time.Since(start).Seconds())
		res.Modified, res.Errors = modified, errs
		if objs.bytesMode {
			res.PatchBytes, res.Patches = 0, map[int]string{}
			for _, p := range patches {
				res.PatchBytes += len(p)
			}
			for _, i := range modified {
				res.Patches[i] = string(patches[i])
			}
		}
		perObject = append(perObject, took...)
	}
	res.ObjectsPerSecond = float64(len(objs.keys)) / quantile(res.Seconds, 0.5)
	res.PerObjectP50us = quantile(perObject, 0.5) * 1e6
	res.PerObjectP99us = quantile(perObject, 0.99) * 1e6
	return res, nil
}

// diffAll is one comparison of every object: the work Argo CD's StateDiffs does per app.
// It returns the indices found modified, the number of errors, each object's time and, in
// bytes mode, each object's serialised patch.
func diffAll(objs *objects, rules []v1alpha1.ResourceIgnoreDifferences, overrides map[string]v1alpha1.ResourceOverride, extra []diff.Option) ([]int, int, []float64, [][]byte, error) {
	normalizer, err := normalizers.NewIgnoreNormalizer(rules, overrides, normalizers.IgnoreNormalizerOpts{})
	if err != nil {
		return nil, 0, nil, nil, err
	}
	opts := append([]diff.Option{diff.WithNormalizer(normalizer)}, extra...)
	n := len(objs.keys)
	modified, errs := []int{}, 0
	took := make([]float64, n)
	var patches [][]byte
	if objs.bytesMode {
		patches = make([][]byte, n)
	}
	for i := 0; i < n; i++ {
		start := time.Now()
		var isModified bool
		if objs.bytesMode {
			patches[i], isModified, err = fromBytes(objs, i, opts)
		} else {
			var result *diff.DiffResult
			result, err = diff.Diff(objs.desired[i], objs.live[i], opts...)
			isModified = err == nil && result.Modified
		}
		took[i] = time.Since(start).Seconds()
		switch {
		case err != nil:
			errs++
		case isModified:
			modified = append(modified, i)
		}
	}
	return modified, errs, took, patches, nil
}

var emptyPatch = []byte("[]")

// fromBytes is the bytes mode's timed path for one object: JSON bytes in (desired, live;
// the dry-run answer's bytes come back from the canned dry run), a JSON Patch's bytes out.
func fromBytes(objs *objects, i int, opts []diff.Option) ([]byte, bool, error) {
	desired, live := &unstructured.Unstructured{}, &unstructured.Unstructured{}
	if err := desired.UnmarshalJSON(objs.rawDesired[i]); err != nil {
		return nil, false, err
	}
	if err := live.UnmarshalJSON(objs.rawLive[i]); err != nil {
		return nil, false, err
	}
	result, err := diff.Diff(desired, live, opts...)
	if err != nil {
		return nil, false, err
	}
	if !result.Modified && !objs.patchAll {
		return emptyPatch, false, nil
	}
	ops, err := jsonpatch.CreatePatch(result.NormalizedLive, result.PredictedLive)
	if err != nil {
		return nil, false, err
	}
	out, err := json.Marshal(ops)
	return out, result.Modified, err
}

// quantile is the nearest-rank q-quantile (the median of an even count is the upper one).
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// versions reports the module versions the binary was built with.
func versions() map[string]string {
	out := map[string]string{}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	for _, dep := range info.Deps {
		switch dep.Path {
		case "github.com/argoproj/gitops-engine", "github.com/argoproj/argo-cd/v3",
			"github.com/itchyny/gojq", "k8s.io/apimachinery":
			out[dep.Path] = dep.Version
		}
	}
	return out
}

// profile writes a CPU profile of the timed part to path (go tool pprof reads it).
func profile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "argodiff:", err)
	os.Exit(1)
}
