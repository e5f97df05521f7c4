// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent.bootstrap;

import io.github.errorownership.hooks.BudgetLimits;
import io.github.errorownership.hooks.HintSource;
import io.github.errorownership.hooks.Mode;
import io.github.errorownership.hooks.OwnershipNames;
import io.github.errorownership.hooks.hints.HintsClient;
import io.github.errorownership.hooks.internal.RetrySettings;
import java.util.Map;
import java.util.logging.Logger;

/**
 * The hooks' settings under the agent, read once from the environment (the names of
 * conformance/vocabulary.yaml, group environment). Loaded by the bootstrap class loader, so that
 * the servlet helpers (the application's class loader), the HttpClient helper (the platform class
 * loader) and the agent's instrumenters (the extension class loader) share one ledger key, one
 * budget per peer and one hint client.
 */
public final class AgentHooks {
  private static final Logger logger = Logger.getLogger(AgentHooks.class.getName());

  private static volatile AgentHooks instance;

  public final HintSource hints;
  public final RetrySettings retry;

  private AgentHooks(Map<String, String> env) {
    BudgetLimits limits = budget(env);
    int maxAttempts =
        (int) number(env, OwnershipNames.ENV_MAX_ATTEMPTS, RetrySettings.DEFAULT_MAX_ATTEMPTS, 1);
    String endpoint = env.get(OwnershipNames.ENV_HINTS_ENDPOINT);
    String service = env.getOrDefault(OwnershipNames.ENV_SERVICE_NAME, "");
    HintsClient client = null;
    if (endpoint != null && !endpoint.isBlank()) {
      if (service.isBlank()) {
        logger.warning(
            OwnershipNames.ENV_HINTS_ENDPOINT
                + " is set but "
                + OwnershipNames.ENV_SERVICE_NAME
                + " is not: the hints are per service; set "
                + OwnershipNames.ENV_SERVICE_NAME
                + ". Running without hints.");
      } else {
        try {
          client = HintsClient.builder(endpoint.trim(), service.trim()).build().start();
        } catch (RuntimeException e) {
          logger.warning(
              OwnershipNames.ENV_HINTS_ENDPOINT
                  + " is not a usable URL ("
                  + e.getMessage()
                  + "): give the collector's hints base URL, e.g. http://otel-collector:4320."
                  + " Running without hints.");
        }
      }
    }
    HintsClient h = client;
    // The hints' budget wins once they carry one; until then (and without hints) the environment's.
    this.hints =
        h == null
            ? null
            : new HintSource() {
              @Override
              public Mode mode(String operation, String peer, String peerOperation) {
                return h.mode(operation, peer, peerOperation);
              }

              @Override
              public BudgetLimits budgetLimits() {
                return h.hints().isPresent() ? h.budgetLimits() : limits;
              }
            };
    HintSource budgetSource =
        this.hints != null
            ? this.hints
            : new HintSource() {
              @Override
              public Mode mode(String operation, String peer, String peerOperation) {
                return Mode.UNKNOWN;
              }

              @Override
              public BudgetLimits budgetLimits() {
                return limits;
              }
            };
    this.retry =
        new RetrySettings(
            budgetSource,
            null,
            maxAttempts,
            RetrySettings.DEFAULT_INITIAL_BACKOFF,
            RetrySettings.DEFAULT_MAX_BACKOFF,
            null);
  }

  /** Returns the settings, made on first use. */
  public static AgentHooks get() {
    AgentHooks h = instance;
    if (h == null) {
      synchronized (AgentHooks.class) {
        h = instance;
        if (h == null) {
          h = new AgentHooks(System.getenv());
          instance = h;
        }
      }
    }
    return h;
  }

  static AgentHooks forTest(Map<String, String> env) {
    return new AgentHooks(env);
  }

  private static BudgetLimits budget(Map<String, String> env) {
    double ratio =
        number(env, OwnershipNames.ENV_RETRY_RATIO, BudgetLimits.DEFAULT_RATIO, 0, 1, false);
    double min =
        number(
            env,
            OwnershipNames.ENV_MIN_RETRIES_PER_SECOND,
            BudgetLimits.DEFAULT_MIN_RETRIES_PER_SECOND,
            0,
            BudgetLimits.MAX_MIN_RETRIES_PER_SECOND,
            false);
    return new BudgetLimits(ratio, min);
  }

  private static double number(Map<String, String> env, String name, double def, double min) {
    return number(env, name, def, min, Integer.MAX_VALUE, true);
  }

  /** Reads a number; a bad one is a warning naming the variable and the fix, then the default. */
  private static double number(
      Map<String, String> env, String name, double def, double min, double max, boolean integer) {
    String s = env.get(name);
    if (s == null || s.isBlank()) {
      return def;
    }
    try {
      double v = integer ? Integer.parseInt(s.trim()) : Double.parseDouble(s.trim());
      if (v >= min && v <= max && !Double.isNaN(v)) {
        return v;
      }
    } catch (NumberFormatException e) {
      // warned below
    }
    logger.warning(
        name
            + "="
            + s
            + " is not "
            + (integer ? "an integer" : "a number")
            + " in ["
            + (integer ? Long.toString((long) min) : Double.toString(min))
            + ", "
            + (integer ? Long.toString((long) max) : Double.toString(max))
            + "]: fix or unset it. Using the default, "
            + (integer ? Long.toString((long) def) : Double.toString(def))
            + ".");
    return def;
  }
}
