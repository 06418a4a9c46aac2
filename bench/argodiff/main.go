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
package main

import (
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type input struct {
	Rounds    int                                    `json:"rounds"`
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
}

type modeResult struct {
	Seconds          []float64 `json:"seconds"`
	ObjectsPerSecond float64   `json:"objects_per_second"`
	PerObjectP50us   float64   `json:"per_object_p50_us"`
	PerObjectP99us   float64   `json:"per_object_p99_us"`
	Modified         []int     `json:"modified"`
	Errors           int       `json:"errors"`
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
	for i, d := range objs.desired {
		dryRun[d.GetNamespace()+"/"+d.GetName()] = objs.predicted[i]
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
		"objects":        len(objs.desired),
		"rounds":         in.Rounds,
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
	return in, nil
}

// decode turns the cases into what Argo CD holds before it diffs: unstructured objects
// for desired (from the repo server) and live (from the cluster cache), JSON text for the
// dry-run answer. This is not timed.
func decode(in *input) (*objects, error) {
	objs := &objects{}
	for i, c := range in.Cases {
		predicted, err := json.Marshal(c.Predicted)
		if err != nil {
			return nil, fmt.Errorf("case %d: %w", i, err)
		}
		objs.desired = append(objs.desired, &unstructured.Unstructured{Object: c.Desired})
		objs.live = append(objs.live, &unstructured.Unstructured{Object: c.Live})
		objs.predicted = append(objs.predicted, string(predicted))
	}
	return objs, nil
}

func bench(objs *objects, in *input, overrides map[string]v1alpha1.ResourceOverride, extra []diff.Option) (modeResult, error) {
	res := modeResult{}
	var perObject []float64
	for round := 0; round < in.Rounds; round++ {
		start := time.Now()
		modified, errs, took, err := diffAll(objs, in.Rules, overrides, extra)
		if err != nil {
			return res, err
		}
		res.Seconds = append(res.Seconds, time.Since(start).Seconds())
		res.Modified, res.Errors = modified, errs
		perObject = append(perObject, took...)
	}
	res.ObjectsPerSecond = float64(len(objs.desired)) / quantile(res.Seconds, 0.5)
	res.PerObjectP50us = quantile(perObject, 0.5) * 1e6
	res.PerObjectP99us = quantile(perObject, 0.99) * 1e6
	return res, nil
}

// diffAll is one comparison of every object: the work Argo CD's StateDiffs does per app.
// It returns the indices found modified, the number of errors and each object's time.
func diffAll(objs *objects, rules []v1alpha1.ResourceIgnoreDifferences, overrides map[string]v1alpha1.ResourceOverride, extra []diff.Option) ([]int, int, []float64, error) {
	normalizer, err := normalizers.NewIgnoreNormalizer(rules, overrides, normalizers.IgnoreNormalizerOpts{})
	if err != nil {
		return nil, 0, nil, err
	}
	opts := append([]diff.Option{diff.WithNormalizer(normalizer)}, extra...)
	modified, errs := []int{}, 0
	took := make([]float64, len(objs.desired))
	for i := range objs.desired {
		start := time.Now()
		result, err := diff.Diff(objs.desired[i], objs.live[i], opts...)
		took[i] = time.Since(start).Seconds()
		switch {
		case err != nil:
			errs++
		case result.Modified:
			modified = append(modified, i)
		}
	}
	return modified, errs, took, nil
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
