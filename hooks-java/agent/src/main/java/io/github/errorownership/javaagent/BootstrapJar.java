// SPDX-License-Identifier: Apache-2.0

package io.github.errorownership.javaagent;

import java.io.File;
import java.io.InputStream;
import java.lang.instrument.Instrumentation;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.jar.JarFile;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Puts the hooks' core (errorownership-bootstrap.jar, inside this jar) on the bootstrap class path,
 * once, before any instrumented class runs: the ledger, the budgets and the hint client are then
 * one set of classes that the web application's class loader, the platform class loader
 * (java.net.http) and the agent's instrumenters all see.
 */
final class BootstrapJar {
  private static final Logger logger = Logger.getLogger(BootstrapJar.class.getName());
  private static boolean installed;

  private BootstrapJar() {}

  static synchronized void install() {
    if (installed) {
      return;
    }
    installed = true;
    try {
      Instrumentation inst =
          (Instrumentation)
              Class.forName(
                      "io.opentelemetry.javaagent.bootstrap.InstrumentationHolder", true, null)
                  .getMethod("getInstrumentation")
                  .invoke(null);
      File jar = File.createTempFile("errorownership-bootstrap", ".jar");
      jar.deleteOnExit();
      try (InputStream in =
          BootstrapJar.class.getResourceAsStream("/errorownership-bootstrap.jar.bin")) {
        if (in == null) {
          throw new IllegalStateException("errorownership-bootstrap.jar.bin is missing");
        }
        Files.copy(in, jar.toPath(), StandardCopyOption.REPLACE_EXISTING);
      }
      inst.appendToBootstrapClassLoaderSearch(new JarFile(jar));
    } catch (Exception | LinkageError e) {
      logger.log(
          Level.WARNING,
          "errorownership: the hooks' core could not be put on the bootstrap class path; the hooks"
              + " stay off. Report this with the agent's version.",
          e);
    }
  }
}
