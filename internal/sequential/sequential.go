// Package sequential is the test `strandlab run --until-verdict` applies
// after every round of a comparison: one build against the baseline on a
// count (stranding episodes, safety violations), looked at as often as
// rounds end, with a known bound on its error rate however many looks are
// taken (docs/statistics.md, "Until a verdict").
//
// Two always-valid constructions, both test supermartingales bounded with
// Ville's inequality (P(sup_t M_t >= 1/a) <= a under the null):
//
//   - "less" or "more": a mixture sequential probability ratio test
//     (Robbins 1970, "Statistical methods related to the law of the
//     iterated logarithm", Ann. Math. Statist. 41(5); the always-valid
//     p-value of Johari, Koomen, Pekelis and Walsh 2022, "Always valid
//     inference", Operations Research 70(3)) on each round's split of the
//     events between the two builds given their total;
//   - "no difference larger than the margin": a time-uniform confidence
//     sequence for each build's rate from a gamma-mixed Poisson
//     likelihood ratio (Howard, Ramdas, McAuliffe and Sekhon 2021,
//     "Time-uniform, nonparametric, nonasymptotic confidence sequences",
//     Ann. Statist. 49(2), section 3), and so for their difference.
//
// The package is pure: counts in, verdict out.
package sequential

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mathext"
)

// Round is one look's new counts: the build's events among its trials and
// the baseline's, in the same round (the same seed and churn).
type Round struct {
	Events, Trials         int
	BaseEvents, BaseTrials int
}

// Design is what a verdict is held to.
type Design struct {
	// Alpha bounds the chance of a wrong verdict of each kind: "less" or
	// "more" for builds that do not differ, and "no difference larger than
	// Margin" for builds that differ by more, however many looks are taken.
	Alpha float64
	// Margin is the difference of rates (events per trial, build minus
	// baseline) that "no difference" rules out in both directions.
	Margin float64
	// DesignEffect (>= 1) is how far rounds vary beyond what independent
	// trials would: the evidence of each round is tempered by it (its
	// log-likelihood ratio divided by it, as an effective sample size
	// divides the trials). 1 (or 0) treats the trials as independent.
	DesignEffect float64
}

// Validate names the bad field.
func (d Design) Validate() error {
	switch {
	case !(d.Alpha > 0 && d.Alpha < 1):
		return fmt.Errorf("sequential: alpha %v is not in (0, 1)", d.Alpha)
	case !(d.Margin > 0 && d.Margin < 1):
		return fmt.Errorf("sequential: margin %v is not in (0, 1)", d.Margin)
	case d.DesignEffect != 0 && !(d.DesignEffect >= 1) || math.IsInf(d.DesignEffect, 0):
		return fmt.Errorf("sequential: design effect %v is below 1", d.DesignEffect)
	}
	return nil
}

// Outcome is where a comparison stands after a look.
type Outcome string

const (
	// Continue: neither test has decided.
	Continue Outcome = "continue"
	// Less: the build's rate is below the baseline's.
	Less Outcome = "less"
	// More: the build's rate is above the baseline's.
	More Outcome = "more"
	// NoDifference: the rates differ by less than the margin.
	NoDifference Outcome = "no-difference"
)

// Verdict is the state of a comparison after its last look.
type Verdict struct {
	Outcome Outcome
	// Looks is the number of rounds looked at; DecidedAt the look the
	// outcome was first reached (0 while it continues).
	Looks, DecidedAt int
	// PValue is the always-valid two-sided p-value for "the rates
	// differ": min(1, 2/max over looks of the larger one-sided mixture
	// likelihood ratio). A verdict of Less or More has PValue <= Alpha.
	PValue float64
	// PValues holds PValue as it stood after each look.
	PValues []float64
	// Events, Trials, BaseEvents, BaseTrials are the pooled counts.
	Events, Trials, BaseEvents, BaseTrials int
	// DiffLow and DiffHigh bound the build's rate minus the baseline's,
	// jointly over all looks with probability at least 1 - Alpha.
	DiffLow, DiffHigh float64
}

// Evaluate looks at rounds in order, after each one, and returns the
// verdict: the first look at which a test decides fixes the outcome (later
// rounds, if any were run, are still pooled into the counts and the
// p-value; a decision is never taken back).
func Evaluate(rounds []Round, d Design) (Verdict, error) {
	if err := d.Validate(); err != nil {
		return Verdict{}, err
	}
	deff := max(d.DesignEffect, 1)
	for i, r := range rounds {
		if r.Events < 0 || r.BaseEvents < 0 || r.Events > r.Trials || r.BaseEvents > r.BaseTrials {
			return Verdict{}, fmt.Errorf("sequential: round %d has %d of %d events against the baseline's %d of %d, want 0 <= events <= trials", i+1, r.Events, r.Trials, r.BaseEvents, r.BaseTrials)
		}
	}
	mix := newMixture()
	v := Verdict{Outcome: Continue, PValue: 1}
	best := 0.0 // the log of the largest one-sided mixture likelihood ratio so far
	for i, r := range rounds {
		mix.add(r, deff)
		less, more := mix.logRatios()
		best = max(best, less, more)
		v.PValue = min(1, math.Exp(math.Ln2-best))
		v.PValues = append(v.PValues, v.PValue)
		v.Events += r.Events
		v.Trials += r.Trials
		v.BaseEvents += r.BaseEvents
		v.BaseTrials += r.BaseTrials
		v.Looks = i + 1
		lowB, highB := RateBounds(v.Events, v.Trials, d.Alpha/2, d.Margin, deff)
		lowA, highA := RateBounds(v.BaseEvents, v.BaseTrials, d.Alpha/2, d.Margin, deff)
		v.DiffLow, v.DiffHigh = lowB-highA, highB-lowA
		if v.Outcome != Continue {
			continue
		}
		switch {
		case v.PValue <= d.Alpha && less >= more:
			v.Outcome, v.DecidedAt = Less, i+1
		case v.PValue <= d.Alpha:
			v.Outcome, v.DecidedAt = More, i+1
		case v.DiffLow > -d.Margin && v.DiffHigh < d.Margin:
			v.Outcome, v.DecidedAt = NoDifference, i+1
		}
	}
	return v, nil
}

// The mixture is over beta, the log of the build's rate over the
// baseline's. Given a round's total k = a + b of events, the build's share
// b is, for rare events, binomial with success probability
// q(beta) = logistic(log(n/m) + beta) (n, m the trials): the round's
// likelihood ratio of beta against 0 is
//
//	(q(beta)/q(0))^b · ((1-q(beta))/(1-q(0)))^a,
//
// which has expectation 1 under the null when b is binomial, and at most 1
// when the trials are independent Bernoulli ones (then b given k is
// hypergeometric, which is below the binomial in the convex order:
// Hoeffding 1963, theorem 4). Their product over rounds is a test
// martingale for every beta, and so is its mixture over a prior on beta.
// The prior is the one Beta(1/2, 1/2) (Jeffreys') on q puts on beta when
// the builds' trials are equal, 1/(2·pi·cosh(beta/2)): heavy-tailed, so
// that a build that removes the events altogether (beta -> -inf) is found
// quickly. Each one-sided test mixes over its half (the prior doubled),
// so "less" and "more" each hold their error to Alpha/2.
//
// While every round with an event had equal trials for both builds (the
// usual case: a round runs the same cycles on each), the rounds pool into
// one binomial split and the mixture has a closed form, the incomplete
// beta integral (logRatiosEqual); the grid is used from the first round
// that had not.
type mixture struct {
	// equal holds while every round so far had equal trials; b and a are
	// then the pooled (tempered) events of the build and the baseline.
	equal bool
	b, a  float64

	betas, logPrior, logLR []float64
	// shifts caches, per log ratio of trials, each beta's change of
	// log q and of log (1-q) from beta = 0.
	shifts map[float64][2][]float64
}

const (
	betaMax  = 30.0 // the prior's mass beyond is below 1e-6
	betaStep = 0.01 // the trapezoid rule's error is then below 1e-4 of either half for the counts seen
)

func newMixture() *mixture { return &mixture{equal: true} }

// grid lays out beta's grid and its prior, with the pooled rounds so far
// (all of equal trials) as one round: the first round of unequal trials
// needs it.
func (m *mixture) grid() {
	n := int(2*betaMax/betaStep) + 1
	m.betas, m.logPrior, m.logLR = make([]float64, n), make([]float64, n), make([]float64, n)
	m.shifts = map[float64][2][]float64{}
	for i := range n {
		b := -betaMax + float64(i)*betaStep
		m.betas[i] = b
		// log(1/(2 pi cosh(b/2))) with cosh computed stably for large |b|.
		h := math.Abs(b) / 2
		m.logPrior[i] = -math.Log(2*math.Pi) - (h + math.Log1p(math.Exp(-2*h)) - math.Ln2) + math.Log(betaStep)
	}
	m.addToGrid(0, m.b, m.a)
}

func (m *mixture) add(r Round, deff float64) {
	if r.Trials == 0 || r.BaseTrials == 0 || r.Events+r.BaseEvents == 0 {
		return // a round without both builds or without an event says nothing about their ratio
	}
	off := math.Log(float64(r.Trials) / float64(r.BaseTrials))
	b, a := float64(r.Events)/deff, float64(r.BaseEvents)/deff
	if m.equal && off != 0 {
		m.grid()
	}
	m.b, m.a = m.b+b, m.a+a
	m.equal = m.equal && off == 0
	if m.betas != nil {
		m.addToGrid(off, b, a)
	}
}

// addToGrid adds a round's log-likelihood ratio at every beta: b of the
// build's events and a of the baseline's, its trials log(n/m) apart.
func (m *mixture) addToGrid(off, b, a float64) {
	s, ok := m.shifts[off]
	if !ok {
		s = [2][]float64{make([]float64, len(m.betas)), make([]float64, len(m.betas))}
		log0q, log0p := logSigmoid(off), logSigmoid(-off)
		for i, beta := range m.betas {
			s[0][i] = logSigmoid(off+beta) - log0q
			s[1][i] = logSigmoid(-off-beta) - log0p
		}
		m.shifts[off] = s
	}
	for i := range m.betas {
		m.logLR[i] += b*s[0][i] + a*s[1][i]
	}
}

// logRatios are the mixture likelihood ratios over beta < 0 (the build's rate
// below the baseline's) and over beta > 0, each with the prior on its half
// renormalised (doubled). The point beta = 0 is split between the halves.
// Logarithms, as the ratios overflow float64 past about a thousand events.
func (m *mixture) logRatios() (less, more float64) {
	if m.equal {
		return logRatioEqual(m.b, m.a), logRatioEqual(m.a, m.b)
	}
	return m.gridLogRatios()
}

// gridLogRatios integrates the mixture over the grid of beta with the
// trapezoid rule.
func (m *mixture) gridLogRatios() (less, more float64) {
	top := math.Inf(-1)
	for i := range m.betas {
		top = max(top, m.logPrior[i]+m.logLR[i])
	}
	mid := len(m.betas) / 2
	for i := range m.betas {
		w := math.Exp(m.logPrior[i] + m.logLR[i] - top)
		switch {
		case i < mid:
			less += w
		case i > mid:
			more += w
		default:
			less += w / 2
			more += w / 2
		}
	}
	// The halves end at beta = 0 where the integrand f is steep: the
	// Euler-Maclaurin end correction h^2/12 f'(0) (the sums are in units
	// of f·h) keeps the smaller half as exact as the larger.
	g := func(i int) float64 { return m.logPrior[i] + m.logLR[i] - top }
	slope := (g(mid+1) - g(mid-1)) / (2 * betaStep)
	end := betaStep / 12 * math.Exp(g(mid)) * slope
	less, more = less-end, more+end
	return math.Ln2 + top + math.Log(less), math.Ln2 + top + math.Log(more)
}

// logRatioEqual is the log of the "less" mixture likelihood ratio when
// the builds' trials are equal: the build's share of the events is
// binomial with q = 1/2 under the null, and the prior Beta(1/2, 1/2) on q
// restricted to q < 1/2 (doubled) gives
//
//	2 · Integral_0^(1/2) q^(b-1/2) (1-q)^(a-1/2) dq / B(1/2, 1/2) · 2^(a+b)
//	= 2 · B(b+1/2, a+1/2) · I_(1/2)(b+1/2, a+1/2) · 2^(a+b) / pi,
//
// with I the regularised incomplete beta function (gonum's mathext).
func logRatioEqual(b, a float64) float64 {
	x, y := b+0.5, a+0.5
	lx, _ := math.Lgamma(x)
	ly, _ := math.Lgamma(y)
	lxy, _ := math.Lgamma(x + y)
	return math.Ln2 + lx + ly - lxy + (a+b)*math.Ln2 + math.Log(mathext.RegIncBeta(x, y, 0.5)) - math.Log(math.Pi)
}

// logSigmoid is log(1/(1+exp(-x))), stable for large |x|.
func logSigmoid(x float64) float64 {
	if x >= 0 {
		return -math.Log1p(math.Exp(-x))
	}
	return x - math.Log1p(math.Exp(x))
}

// RateBounds is a time-uniform confidence sequence for a rate of events
// per trial at level 1-alpha after events among trials: it holds at every
// look at once. Against rate r, the likelihood ratio of a Poisson rate s
// mixed over a Gamma(1, b) prior (mean 1/b) is
//
//	M(r) = Integral (s/r)^x e^(-(s-r)n) b e^(-bs) ds = b Gamma(1+x) / (b+n)^(1+x) · r^(-x) e^(rn),
//
// a supermartingale under rate r for Poisson counts and for independent
// Bernoulli trials of probability r (per trial, E[(s/r)^X e^(-(s-r))] =
// (1+s-r) e^(-(s-r)) <= 1); the sequence is {r : M(r) < 1/alpha}. The
// prior centres on scale (b = 1/scale), the margin, where the bounds
// matter. The counts are divided by deff first (an effective sample size).
func RateBounds(events, trials int, alpha, scale, deff float64) (low, high float64) {
	deff = max(deff, 1)
	x, n := float64(events)/deff, float64(trials)/deff
	b := 1 / scale
	// log M(r) = c - x log r + r n, convex in r with its minimum at x/n.
	c := math.Log(b) - (1+x)*math.Log(b+n)
	lg, _ := math.Lgamma(1 + x)
	c += lg
	logM := func(r float64) float64 {
		if r == 0 {
			if x == 0 {
				return c
			}
			return math.Inf(1)
		}
		return c - x*math.Log(r) + r*n
	}
	limit := math.Log(1 / alpha)
	mode := 0.0
	if n > 0 {
		mode = x / n
	}
	switch {
	case n == 0:
		return 0, 1
	case logM(mode) >= limit:
		// Every rate is excluded: one of the alpha-rare paths on which the
		// sequence misses. The estimate is the least wrong answer.
		return mode, mode
	}
	high = 1
	if logM(1) >= limit {
		high = bisect(logM, limit, mode, 1)
	}
	if x > 0 {
		low = bisect(logM, limit, mode, 0)
	}
	return low, high
}

// bisect finds where f crosses limit between in (f(in) < limit) and out
// (f(out) >= limit), to float64's precision.
func bisect(f func(float64) float64, limit, in, out float64) float64 {
	for range 200 {
		mid := (in + out) / 2
		if mid == in || mid == out {
			break // as close as float64 gets
		}
		if f(mid) < limit {
			in = mid
		} else {
			out = mid
		}
	}
	return out
}
