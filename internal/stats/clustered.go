package stats

// A rate whose trials come in dependent groups (docs/statistics.md,
// "Rounds as the unit"): the cycles of one round of the churn share a
// cluster, a controller and a proxy at the same moment, so they are not
// independent trials, but rounds are close to independent of one another.
//
// The interval is Korn and Graubard's (1998) Clopper-Pearson interval with
// an effective sample size: the rate is the ratio estimator Σy/Σn over the
// units, its variance the cluster-robust (linearisation) one, and the
// design effect (that variance over the binomial one) shrinks the number
// of trials the exact binomial interval is computed with; a further factor
// (t quantiles at n-1 and at units-1 degrees of freedom) widens it when
// there are few units. The distributions (Student's t and Beta quantiles)
// are gonum's stat/distuv.

import (
	"fmt"

	"gonum.org/v1/gonum/stat/distuv"
)

// Unit is one independent unit of a clustered rate (a round of the churn,
// or a run): its trials and the events among them.
type Unit struct {
	Trials, Events int
}

// ClusteredRate is a rate with its 95% interval computed from independent
// units (Clustered95).
type ClusteredRate struct {
	// Rate is the ratio estimator: events over trials, all units pooled.
	Rate float64
	// Low and High bound the 95% interval.
	Low, High float64
	// DesignEffect is the rate's variance with the units as the
	// independent draws over its variance if every trial were
	// independent, at least 1 (see Clustered95).
	DesignEffect float64
	// EffectiveTrials is the number of independent trials the interval is
	// worth: trials / DesignEffect, times the few-units factor.
	EffectiveTrials float64
	// Units counts the units with at least one trial.
	Units int
}

// Clustered95 is the 95% interval of a rate whose units (rounds, runs) are
// independent of one another while the trials within a unit may not be:
//
//   - the rate p = Σ events / Σ trials over the units (those with no trial
//     are left out);
//   - its variance v = G/(G-1) · Σ (events_i - p·trials_i)² / (Σ trials)²
//     over the G units (the cluster-robust variance of a ratio estimator,
//     with the usual small-sample factor G/(G-1));
//   - the design effect d = v / (p(1-p)/n), floored at 1: with no event (or
//     only events) v is 0 and d is 1, and an estimate below 1 (units more
//     alike than independent trials would be) is taken as 1, so the
//     interval is never narrower than the exact binomial one for
//     independent trials;
//   - the effective trials n* = n/d · (t(n-1)/t(G-1))², with t(k) the
//     97.5% quantile of Student's t with k degrees of freedom;
//   - the Clopper-Pearson interval of x* = p·n* events in n* trials:
//     [Beta(x*, n*-x*+1) at 2.5%, Beta(x*+1, n*-x*) at 97.5%], with 0
//     below when p = 0 and 1 above when p = 1.
//
// It needs at least two units with trials (one unit says nothing about how
// units vary) and 0 <= events <= trials in each.
func Clustered95(units []Unit) (ClusteredRate, error) {
	var n, y int
	g := 0
	for i, u := range units {
		if u.Trials < 0 || u.Events < 0 || u.Events > u.Trials {
			return ClusteredRate{}, fmt.Errorf("stats: unit %d has %d events in %d trials, want 0 <= events <= trials", i, u.Events, u.Trials)
		}
		if u.Trials > 0 {
			g++
			n += u.Trials
			y += u.Events
		}
	}
	if g < 2 {
		return ClusteredRate{}, fmt.Errorf("stats: %d unit(s) with trials, at least two are needed to see how units vary", g)
	}
	nf := float64(n)
	p := float64(y) / nf
	deff := 1.0
	if y > 0 && y < n {
		ss := 0.0
		for _, u := range units {
			if u.Trials > 0 {
				r := float64(u.Events) - p*float64(u.Trials)
				ss += r * r
			}
		}
		v := float64(g) / float64(g-1) * ss / (nf * nf)
		deff = max(v/(p*(1-p)/nf), 1)
	}
	few := t975(n-1) / t975(g-1)
	eff := nf / deff * few * few
	x := p * eff
	out := ClusteredRate{Rate: p, Low: 0, High: 1, DesignEffect: deff, EffectiveTrials: eff, Units: g}
	if y > 0 {
		out.Low = distuv.Beta{Alpha: x, Beta: eff - x + 1}.Quantile(0.025)
	}
	if y < n {
		out.High = distuv.Beta{Alpha: x + 1, Beta: eff - x}.Quantile(0.975)
	}
	return out, nil
}

// t975 is the 97.5% quantile of Student's t with df degrees of freedom
// (df >= 1).
func t975(df int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(0.975)
}
