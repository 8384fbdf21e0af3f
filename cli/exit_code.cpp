#include "cli/exit_code.h"

#include <exception>
#include <ostream>

#include "core/errors.h"

namespace ncclguard::cli {

int RunReportingErrors(const std::function<int()>& command, std::ostream& err) {
  try {
    return command();
  } catch (const core::InputError& e) {
    err << "ncclguard: " << e.what() << "\n";
    return kExitInputError;
  } catch (const core::PolicyError& e) {
    err << "ncclguard: policy: " << e.what() << "\n";
    return kExitInputError;
  } catch (const std::exception& e) {
    err << "ncclguard: internal error: " << e.what() << "\n";
    return kExitInternalError;
  } catch (...) {
    err << "ncclguard: internal error: an exception that is not a std::exception\n";
    return kExitInternalError;
  }
}

}  // namespace ncclguard::cli
