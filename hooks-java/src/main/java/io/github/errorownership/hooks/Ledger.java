// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.hooks;

import io.opentelemetry.context.Context;
import io.opentelemetry.context.ContextKey;
import io.opentelemetry.context.ImplicitContextKeyed;
import java.util.ArrayList;
import java.util.List;

/**
 * Records the outbound logical calls of one inbound request, so that the server hook can decide the
 * claim when the request fails. It travels in the OpenTelemetry {@link Context}, so it flows
 * wherever the instrumentation's context does; client hooks find it with {@link #current()} and
 * record each call with {@link #begin} and {@link #end}. Calls of a fan-out may record
 * concurrently. A call begun and not ended is in flight.
 */
public final class Ledger implements ImplicitContextKeyed {
  private static final ContextKey<Ledger> KEY = ContextKey.named("errorownership-ledger");

  private final List<Outcome> calls = new ArrayList<>(4);
  private final List<Boolean> done = new ArrayList<>(4);

  /** Returns a new, empty ledger. */
  public static Ledger create() {
    return new Ledger();
  }

  private Ledger() {}

  /** Returns the ledger of the current context, or {@code null}. */
  public static Ledger current() {
    return Context.current().get(KEY);
  }

  /** Returns the ledger {@code context} carries, or {@code null}. */
  public static Ledger fromContext(Context context) {
    return context == null ? null : context.get(KEY);
  }

  @Override
  public Context storeInContext(Context context) {
    return context.with(KEY, this);
  }

  /** Notes that an outbound logical call to {@code peer} started, and returns its number. */
  public synchronized int begin(String peer) {
    calls.add(Outcome.inFlight(peer));
    done.add(Boolean.FALSE);
    return calls.size() - 1;
  }

  /** Records the final outcome of call {@code call}. */
  public synchronized void end(int call, Outcome outcome) {
    if (call < 0 || call >= calls.size()) {
      return;
    }
    calls.set(call, outcome);
    done.set(call, Boolean.TRUE);
  }

  /** Records a finished call in one step. */
  public void record(Outcome outcome) {
    end(begin(outcome.peerService()), outcome);
  }

  /**
   * Returns a snapshot of every call recorded so far, in the order they began; a call not yet ended
   * is reported in flight, with only its peer known.
   */
  public synchronized List<Outcome> outcomes() {
    List<Outcome> out = new ArrayList<>(calls.size());
    for (int i = 0; i < calls.size(); i++) {
      Outcome o = calls.get(i);
      out.add(done.get(i) ? o : Outcome.inFlight(o.peerService()));
    }
    return out;
  }

  /**
   * Snapshots the ledger and applies {@link ClaimDecision#decide}. A call still in flight means the
   * request gave up waiting on it: timed out, whatever {@code timedOut} says.
   */
  public Verdict decide(ModeFunction modes, boolean timedOut) {
    List<Outcome> outcomes = outcomes();
    for (Outcome o : outcomes) {
      if (o.inFlight()) {
        timedOut = true;
        break;
      }
    }
    return ClaimDecision.decide(outcomes, modes, timedOut);
  }
}
