# The settings of the study "good and different on every task" (benchmarks/results/good_and_different/PROTOCOL.md):
# `settings_args NAME` prints the npsco flags of the setting NAME. Sourced by screen.sh and chains.sh.
settings_args() {
  case $1 in
    lagr-m20) echo "--method lagrangian --mset lagrangian_margin=0.2" ;;
    lagr-m30) echo "--method lagrangian --mset lagrangian_margin=0.3" ;;
    lagr-joint) echo "--method lagrangian --mset lagrangian_joint=true --mset lagrangian_margin=0.2" ;;
    lagr-ret) echo "--method lagrangian --mset lagrangian_constrain=return --mset return_alpha=0.9" ;;
    *) echo "unknown setting $1 (lagr-m20, lagr-m30, lagr-joint, lagr-ret)" >&2; return 2 ;;
  esac
}
