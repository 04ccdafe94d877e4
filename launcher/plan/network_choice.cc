#include "launcher/plan/network_choice.h"

#include <algorithm>
#include <sstream>

namespace hvrun::launcher {

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

namespace {

std::string label(const std::string& host) { return host.empty() ? "the launch host" : host; }

}  // namespace

Result<InterfaceChoice> choose_interface(const HostInterfaces& target,
                                         const std::vector<std::string>& peers,
                                         const std::vector<ProbeOutcome>& probes,
                                         const std::vector<std::string>& forced) {
  InterfaceChoice choice;
  choice.host = target.host;
  if (!forced.empty()) {
    for (const std::string& name : forced) {
      for (const NetInterface& iface : target.interfaces) {
        if (iface.name != name) continue;
        choice.interface = iface.name;
        choice.address = iface.address;
        choice.reasons.push_back(iface.name + " (" + iface.address +
                                 "): chosen by --network-interface (not probed)");
        return choice;
      }
    }
    std::string have;
    for (const NetInterface& iface : target.interfaces) have += " " + iface.name;
    return invalid_argument(label(target.host) +
                            " has none of the interfaces given to "
                            "--network-interface; it has:" +
                            (have.empty() ? " none" : have));
  }

  std::vector<std::string> excluded;
  std::vector<NetInterface> candidates = rank_candidates(target.interfaces, &excluded);
  for (const NetInterface& iface : candidates) {
    const std::string where = iface.address + ":" + std::to_string(iface.probe_port);
    std::vector<std::string> missing;
    for (const std::string& peer : peers) {
      auto it = std::find_if(probes.begin(), probes.end(), [&](const ProbeOutcome& p) {
        return p.prober == peer && p.target == where;
      });
      if (it == probes.end())
        missing.push_back(peer + " (not probed)");
      else if (!it->reached)
        missing.push_back(peer + " (" + it->error + ")");
    }
    if (iface.probe_port == 0 && !peers.empty()) missing = {"nobody (no probe listener)"};
    if (missing.empty()) {
      if (choice.interface.empty()) {
        choice.interface = iface.name;
        choice.address = iface.address;
        choice.reasons.push_back(
            iface.name + " (" + iface.address + "): chosen, " +
            (peers.empty() ? std::string("no peer to probe") : "reached from every peer"));
      } else {
        choice.reasons.push_back(iface.name + " (" + iface.address +
                                 "): also reachable, ranked lower");
      }
    } else {
      std::string text = iface.name + " (" + iface.address + "): not reached from";
      for (size_t i = 0; i < missing.size(); ++i) text += (i ? ", " : " ") + missing[i];
      choice.reasons.push_back(text);
    }
  }
  for (const std::string& e : excluded) choice.reasons.push_back(e);
  if (choice.interface.empty()) {
    std::string text = label(target.host) + ": no interface is reachable from every other host";
    for (const std::string& r : choice.reasons) text += "; " + r;
    return unavailable(text +
                       ". Check the hosts' firewalls and routes, or name the interface "
                       "with --network-interface");
  }
  return choice;
}

}  // namespace hvrun::launcher

namespace hvrun::launcher {

Environment_t host_network_environment(const InterfaceChoice& choice, const std::string& network,
                                       const Environment_t& user,
                                       std::vector<std::string>* reasons) {
  Environment_t set;
  auto decide = [&](const std::string& key, const std::string& value, const std::string& why) {
    if (auto it = user.find(key); it != user.end()) {
      if (reasons)
        reasons->push_back(key + "=" + it->second + " (set by you, passed on unchanged)");
      return;
    }
    set[key] = value;
    if (reasons) reasons->push_back(key + "=" + value + " (" + why + ")");
  };
  decide("NCCL_SOCKET_IFNAME", "=" + choice.interface,
         "the interface chosen for " + choice.host + ", exact name");
  decide("GLOO_SOCKET_IFNAME", choice.interface, "the interface chosen for " + choice.host);
  if (network == "ethernet") decide("NCCL_IB_DISABLE", "1", "--network ethernet");
  return set;
}

}  // namespace hvrun::launcher
